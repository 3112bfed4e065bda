// Step progress for `stallscope run` (see progress.hpp). Runs on the
// flusher thread only, after a chunk was written.
#include "recorder/progress.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "recorder/recorder.hpp"
#include "stallscope/clock.hpp"
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

// Where a record's duration is summed for the live line; nullptr: nowhere.
double* total_of(ProgressState& p, uint8_t kind) {
  switch (static_cast<format::Kind>(kind)) {
    case format::Kind::kStep: return &p.step_ns;
    case format::Kind::kDataWait: return &p.wait_ns;
    case format::Kind::kKernel: return &p.kernel_ns;
    case format::Kind::kH2D:
    case format::Kind::kD2H:
    case format::Kind::kD2D:
    case format::Kind::kMemset: return &p.copy_ns;
    case format::Kind::kCollective: return &p.comm_ns;
    default: return nullptr;
  }
}

// Adds a record's duration: a complete record's own, or a begin's to its
// end on the same track (asynchronous pairs, matched by id, are left out).
void add_duration(ProgressState& p, uint32_t track, const format::CoreRecord& c) {
  double* total = total_of(p, c.kind);
  if (total == nullptr || (c.flags & format::kAsync) != 0) return;
  const double scale = (c.flags & format::kTimesNs) != 0 ? 1.0 : p.ns_per_tick;
  const uint64_t key = uint64_t{track} << 8 | c.kind;
  switch (c.flags & format::kPhaseMask) {
    case format::kComplete: *total += double(c.value) * scale; break;
    case format::kBegin:
      if (p.open_begin.size() < 4096) p.open_begin[key] = c.ts;
      break;
    case format::kEnd:
      if (auto it = p.open_begin.find(key); it != p.open_begin.end()) {
        if (c.ts > it->second) *total += double(c.ts - it->second) * scale;
        p.open_begin.erase(it);
      }
      break;
    default: break;
  }
}

void scan_records(ProgressState& p, Recorder& r, uint32_t track, const uint8_t* data, size_t bytes) {
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
    add_duration(p, track, c);
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

namespace {

// RUN/progress as a descriptor (O_NOFOLLOW: a symlink planted there, at
// start or since, is never followed); -1 with errno.
int open_progress_dir(Recorder& r) {
  const int run = r.writer.dir_fd();
  if (run < 0) {
    errno = ENOENT;
    return -1;
  }
  return ::openat(run, "progress", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// ".<base>.<16 hex digits>": unpredictable, created O_EXCL. Into `out`:
// the flusher allocates nothing from the C heap (RELIABILITY.md 39).
void temp_name(const std::string& base, char* out, size_t size) {
  uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits))
    bits = static_cast<uint64_t>(mono_ns()) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(::getpid());
  std::snprintf(out, size, ".%s.%016llx", base.c_str(), static_cast<unsigned long long>(bits));
}

}  // namespace

void progress_open(Recorder& r, const std::string& base) {
  ProgressState& p = r.progress;
  p.on = r.cfg.progress;
  if (!p.on) return;
  p.last_written.reserve(320);  // here, not on the flusher (progress_publish's text)
  const std::string dir = r.run_dir + "/progress";
  const int run = r.writer.dir_fd();
  if (run < 0 || (::mkdirat(run, "progress", 0777) != 0 && errno != EEXIST)) {
    warn(dir + ": cannot create (" + std::strerror(run < 0 ? ENOENT : errno) +
         "); no step progress for stallscope run");
    p.on = false;
    return;
  }
  const int fd = open_progress_dir(r);
  if (fd < 0) {
    warn(dir + ": not a directory (a symlink or a file is there); no step progress for "
         "stallscope run");
    p.on = false;
    return;
  }
  ::close(fd);
  p.path = dir + "/" + base;
  p.base = base;
}

void progress_scan(Recorder& r, const uint8_t* payload, size_t bytes) {
  if (!r.progress.on && !r.sample_in_flusher) return;
  if (r.progress.ns_per_tick == 0) r.progress.ns_per_tick = stallscope::ns_per_tick();
  size_t off = 0;
  while (off + sizeof(format::TrackBlock) <= bytes) {
    format::TrackBlock blk;
    std::memcpy(&blk, payload + off, sizeof blk);
    off += sizeof blk;
    if (blk.bytes > bytes - off) return;
    scan_records(r.progress, r, blk.track_id, payload + off, blk.bytes);
    off += blk.bytes;
  }
}

void progress_publish(Recorder& r, bool ended) {
  ProgressState& p = r.progress;
  if (!p.on) return;
  char text[320];
  std::snprintf(text, sizeof text,
                "pid=%d steps=%llu capture=%s windows_closed=%llu ended=%d step_ms=%.1f wait_ms=%.1f "
                "kernel_ms=%.1f copy_ms=%.1f comm_ms=%.1f\n",
                r.pid, static_cast<unsigned long long>(p.steps), p.capture ? "on" : "off",
                static_cast<unsigned long long>(p.windows_closed), ended ? 1 : 0, p.step_ns / 1e6,
                p.wait_ns / 1e6, p.kernel_ns / 1e6, p.copy_ns / 1e6, p.comm_ns / 1e6);
  if (p.last_written == text) return;
  // RUN/progress opened afresh without following a symlink, the names in
  // it reached through that descriptor: RUN/progress replaced by a symlink
  // mid-run leads nowhere (RELIABILITY.md 44). A fresh, unpredictable name
  // (O_EXCL), renamed over the last: nothing planted in the directory is
  // followed or written into.
  const int dir = open_progress_dir(r);
  if (dir < 0) return;  // retried at the next flush
  struct stat st{};
  if (::fstatat(dir, p.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    ::close(dir);  // a FIFO, device or symlink stays what it is
    warn(p.path + ": not a regular file; left alone, no step progress for stallscope run");
    p.on = false;
    return;
  }
  char tmp_name[320];  // a trace file's base is far shorter
  temp_name(p.base, tmp_name, sizeof tmp_name);
  const int fd = ::openat(dir, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          0644);
  if (fd >= 0) {
    const size_t n = std::strlen(text);
    const bool ok = ::fchmod(fd, 0644) == 0 && ::write(fd, text, n) == static_cast<ssize_t>(n);
    ::close(fd);
    if (ok && ::renameat(dir, tmp_name, dir, p.base.c_str()) == 0) {
      p.last_written = text;
    } else {
      ::unlinkat(dir, tmp_name, 0);
    }
  }
  ::close(dir);
}

}  // namespace stallscope::detail
