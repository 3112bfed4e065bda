#include "proc_maps.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

namespace stallscope::preload {

namespace {

constexpr std::string_view kDeleted = " (deleted)";
constexpr size_t kMaxMapsBytes = 64u << 20;  // a runaway file is cut, never followed

// Splits off the next space-separated field of `line`.
std::string_view next_field(std::string_view& line) {
  const size_t b = line.find_first_not_of(' ');
  if (b == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(b);
  const size_t e = std::min(line.find(' '), line.size());
  const std::string_view f = line.substr(0, e);
  line.remove_prefix(e);
  return f;
}

bool parse_hex(std::string_view s, uint64_t* v) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *v, 16);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// "start-end perms offset dev inode [path]"
bool parse_line(std::string_view line, Mapping* m) {
  const std::string_view range = next_field(line), perms = next_field(line);
  const std::string_view offset = next_field(line);
  next_field(line);  // device
  next_field(line);  // inode
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos || perms.size() < 4) return false;
  if (!parse_hex(range.substr(0, dash), &m->start) || !parse_hex(range.substr(dash + 1), &m->end) ||
      !parse_hex(offset, &m->offset) || m->end <= m->start) {
    return false;
  }
  m->exec = perms[2] == 'x';
  const size_t p = line.find_first_not_of(' ');
  std::string_view path = p == std::string_view::npos ? std::string_view{} : line.substr(p);
  if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
  m->path = path.starts_with('/') ? std::string(path) : std::string();
  return true;
}

}  // namespace

std::vector<Mapping> parse_maps(std::string_view text) {
  std::vector<Mapping> out;
  while (!text.empty()) {
    const size_t nl = std::min(text.find('\n'), text.size());
    Mapping m;
    if (parse_line(text.substr(0, nl), &m)) out.push_back(std::move(m));
    text.remove_prefix(std::min(nl + 1, text.size()));
  }
  // The kernel lists mappings in address order; sort anyway so that a
  // lookup never depends on it.
  std::sort(out.begin(), out.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return out;
}

bool read_self_maps(std::string* out) noexcept {
  const long fd = ::syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = true;
  try {
    out->clear();
    char buf[16384];
    for (;;) {
      const long n = ::syscall(SYS_read, fd, buf, sizeof buf);
      if (n < 0) {
        ok = false;
        break;
      }
      if (n == 0 || out->size() >= kMaxMapsBytes) break;
      out->append(buf, static_cast<size_t>(n));
    }
  } catch (...) {  // out of memory: no map this time
    ok = false;
  }
  ::syscall(SYS_close, fd);
  return ok;
}

const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t addr) noexcept {
  auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                             [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

}  // namespace stallscope::preload
