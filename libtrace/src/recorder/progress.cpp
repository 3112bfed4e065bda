// Step progress for `stallscope run` (see progress.hpp). Runs on the
// flusher thread only, after a chunk was written.
#include "recorder/progress.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "recorder/recorder.hpp"
#include "stallscope/format.hpp"

namespace stallscope::detail {
namespace {

bool eat_prefix(std::string_view& s, std::string_view p) {
  if (s.size() < p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
  s.remove_prefix(p.size());
  return true;
}

size_t eat_digits(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  s.remove_prefix(n);
  return n;
}

// ([ _#:.-]*\d+)?$
bool number_tail(std::string_view s) {
  if (s.empty()) return true;
  while (!s.empty() && std::strchr(" _#:.-", s.front()) != nullptr) s.remove_prefix(1);
  return eat_digits(s) > 0 && s.empty();
}

void scan_records(ProgressState& p, Recorder& r, const uint8_t* data, size_t bytes) {
  size_t off = 0;
  while (off + sizeof(format::CoreRecord) <= bytes) {
    if (data[off] >= format::kExtBase) {
      uint16_t len;
      std::memcpy(&len, data + off + 2, sizeof len);
      if (len < sizeof(format::ExtHeader) || len % 8 != 0) return;
      off += len;
      continue;
    }
    format::CoreRecord c;
    std::memcpy(&c, data + off, sizeof c);
    off += sizeof c;
    const uint8_t phase = c.flags & format::kPhaseMask;
    const bool opens = phase == format::kBegin || phase == format::kComplete;
    if (c.kind == static_cast<uint8_t>(format::Kind::kStep) && opens) {
      ++p.steps;
    } else if (c.kind == static_cast<uint8_t>(format::Kind::kRange) && opens && c.name_id != 0) {
      auto [it, fresh] = p.range_is_step.try_emplace(c.name_id, false);
      if (fresh) it->second = is_step_range_name(r.registry.name_of(c.name_id));
      if (it->second) ++p.steps;
    } else if (c.kind == static_cast<uint8_t>(format::Kind::kCapture)) {
      p.capture = phase == format::kBegin;
      if (phase == format::kEnd) ++p.windows_closed;
    }
  }
}

}  // namespace

bool is_step_range_name(std::string_view s) noexcept {
  if (eat_prefix(s, "profilerstep#")) return eat_digits(s) > 0 && number_tail(s);
  if (eat_prefix(s, "train_step") || eat_prefix(s, "step") || eat_prefix(s, "iteration"))
    return number_tail(s);
  return false;
}

void progress_open(Recorder& r, const std::string& base) {
  ProgressState& p = r.progress;
  p.on = r.cfg.progress;
  if (!p.on) return;
  const std::string dir = r.run_dir + "/progress";
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    warn(dir + ": cannot create (" + std::strerror(errno) +
         "); no step progress for stallscope run");
    p.on = false;
    return;
  }
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    warn(dir + ": not a directory (a symlink or a file is there); no step progress for "
         "stallscope run");
    p.on = false;
    return;
  }
  p.path = dir + "/" + base;
  p.tmp_template = dir + "/." + base + ".XXXXXX";
}

void progress_scan(Recorder& r, const uint8_t* payload, size_t bytes) {
  if (!r.progress.on && !r.sample_in_flusher) return;
  size_t off = 0;
  while (off + sizeof(format::TrackBlock) <= bytes) {
    format::TrackBlock blk;
    std::memcpy(&blk, payload + off, sizeof blk);
    off += sizeof blk;
    if (blk.bytes > bytes - off) return;
    scan_records(r.progress, r, payload + off, blk.bytes);
    off += blk.bytes;
  }
}

void progress_publish(Recorder& r, bool ended) {
  ProgressState& p = r.progress;
  if (!p.on) return;
  char text[160];
  std::snprintf(text, sizeof text, "pid=%d steps=%llu capture=%s windows_closed=%llu ended=%d\n",
                r.pid, static_cast<unsigned long long>(p.steps), p.capture ? "on" : "off",
                static_cast<unsigned long long>(p.windows_closed), ended ? 1 : 0);
  if (p.last_written == text) return;
  // A fresh, unpredictable name (mkostemp: O_EXCL), renamed over the last:
  // nothing planted in the directory is followed or written into.
  std::string tmp = p.tmp_template;
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return;  // retried at the next flush
  const size_t n = std::strlen(text);
  const bool ok = ::fchmod(fd, 0644) == 0 && ::write(fd, text, n) == static_cast<ssize_t>(n);
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), p.path.c_str()) == 0) {
    p.last_written = text;
  } else {
    ::unlink(tmp.c_str());
  }
}

}  // namespace stallscope::detail
