#include "stallscope/internal/proc_text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <utility>

#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::sys {

namespace {

// A program that closed 0-2 takes them back with its next open or dup2,
// which may come from another thread while ours reads: a descriptor of
// ours held there could be closed under the program's file, or make the
// program's open land elsewhere. So a file opened at 0-2 (`st`: what was
// opened) moves to 3 or above at once; the low number is closed only while
// it still names that file, and a copy that is not that file (the program
// took the number before the move) is dropped. Returns the descriptor, or
// -errno.
int off_standard_numbers(int fd, const struct stat& st) {
  if (fd > 2) return fd;
  const long high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  struct stat now {};
  if (::fstat(fd, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) ::close(fd);
  if (high < 0) return -EMFILE;
  if (::fstat(static_cast<int>(high), &now) != 0 || now.st_dev != st.st_dev ||
      now.st_ino != st.st_ino) {
    ::close(static_cast<int>(high));
    return -EAGAIN;
  }
  return static_cast<int>(high);
}

}  // namespace

bool read_text_file(const std::string& path, std::string& out, size_t limit) {
  out.clear();
  // O_NONBLOCK and the type check: a FIFO or device put where a file is
  // expected (RUN/run.json) is never waited on. /proc and /sys files are
  // regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  fd = off_standard_numbers(fd, st);
  if (fd < 0) return false;
  char buf[4096];
  bool ok = true;
  while (out.size() < limit) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!ok) out.clear();
  return ok;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

std::optional<uint64_t> parse_uint64(std::string_view s) {
  if (s.empty() || s.front() < '0' || s.front() > '9') return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_int64(std::string_view s) {
  const bool neg = !s.empty() && s.front() == '-';
  const auto mag = parse_uint64(neg ? s.substr(1) : s);
  if (!mag) return std::nullopt;
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  if (*mag > kMax + (neg ? 1 : 0)) return std::nullopt;
  if (!neg) return static_cast<int64_t>(*mag);
  return *mag == kMax + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(*mag);
}

std::vector<int> parse_cpu_list(std::string_view s) {
  constexpr uint64_t kMaxCpu = 1 << 20;  // bounds memory on garbage input
  std::vector<int> cpus;
  s = trim(s);
  while (!s.empty()) {
    const size_t comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    const size_t dash = item.find('-');
    const auto lo = parse_uint64(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : parse_uint64(item.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi >= kMaxCpu) return {};
    if (cpus.size() + (*hi - *lo + 1) > kMaxCpu) return {};  // repeated ranges: garbage too
    for (uint64_t c = *lo; c <= *hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string_view stat_field(std::string_view stat, int n) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos || n < 3) return {};
  std::string_view rest = stat.substr(paren + 1);
  for (int field = 3;; ++field) {
    const size_t b = rest.find_first_not_of(" \n");
    if (b == std::string_view::npos) return {};
    rest = rest.substr(b);
    const size_t e = std::min(rest.find(' '), rest.find('\n'));
    if (field == n) return rest.substr(0, e);
    if (e == std::string_view::npos) return {};
    rest = rest.substr(e);
  }
}

std::optional<int64_t> find_key_value(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.size() > key.size() && line.substr(0, key.size()) == key &&
        (line[key.size()] == ' ' || line[key.size()] == '\t')) {
      return parse_int64(trim(line.substr(key.size())));
    }
  }
  return std::nullopt;
}

// ---- OwnedFd

OwnedFd& OwnedFd::operator=(OwnedFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
    dev_ = o.dev_;
    ino_ = o.ino_;
  }
  return *this;
}

int OwnedFd::open_at(int dirfd, const char* path, int flags) {
  reset();
  int fd = ::openat(dirfd, path, flags | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return -err;
  }
  fd = off_standard_numbers(fd, st);
  if (fd < 0) return fd;
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return 0;
}

int OwnedFd::open_kept_at(int dirfd, const char* path, int flags) {
  if (const int rc = open_at(dirfd, path, flags); rc != 0) return rc;
  fd_ = move_fd_high(fd_);
  return fd_ >= 0 ? 0 : -EMFILE;
}

bool OwnedFd::still_ours() const {
  struct stat st {};
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void OwnedFd::reset() {
  if (still_ours()) ::close(fd_);
  fd_ = -1;
}

ssize_t OwnedFd::pread_text(char* buf, size_t cap) const {
  if (fd_ < 0 || cap == 0) return -EBADF;
  size_t got = 0;
  while (got + 1 < cap) {
    const size_t want = cap - 1 - got;
    const ssize_t n = ::pread(fd_, buf + got, want, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    got += static_cast<size_t>(n);
    // A short read is EOF for proc/sysfs/cgroup files; asking again to see
    // 0 would double the syscalls on the sampler's path.
    if (static_cast<size_t>(n) < want) break;
  }
  buf[got] = '\0';
  return static_cast<ssize_t>(got);
}

}  // namespace stallscope::sys
