#include "sys/sampler_tables.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>

#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::sys {
namespace {

constexpr int kMajfltField = 12;       // /proc/<pid>/task/<tid>/stat, proc(5)
constexpr size_t kMaxKeptFds = 256;    // stat files kept open, at most …
constexpr size_t kFdShareDivisor = 8;  // … and at most 1/8 of RLIMIT_NOFILE

std::optional<pid_t> parse_pid(std::string_view s) {
  const auto v = parse_uint64(s);
  if (!v || *v == 0 || *v > 0x3fffffff) return std::nullopt;  // PID_MAX_LIMIT is 2^22
  return static_cast<pid_t>(*v);
}

// None under a small limit (stallscope/internal/fd_limits.hpp): each read opens its file.
size_t fd_budget() {
  const uint64_t limit = nofile_limit();
  if (limit < kKeepStatsNofile) return 0;
  return static_cast<size_t>(std::min<uint64_t>(kMaxKeptFds, limit / kFdShareDivisor));
}

// Adds to a table sorted by id the ids of a sorted list it does not hold
// yet (`make` may append one entry per id), after removing gone entries.
template <class Table, class Make>
void add_listed(Table& table, const std::vector<pid_t>& ids, Make make) {
  std::erase_if(table, [](const auto& e) { return e.gone; });
  const size_t old = table.size();
  for (const pid_t id : ids) {
    const auto end = table.begin() + static_cast<ptrdiff_t>(old);
    const auto it =
        std::lower_bound(table.begin(), end, id, [](const auto& e, pid_t v) { return e.id < v; });
    if (it == end || it->id != id) make(id);
  }
  // Each new entry rotated into place: std::inplace_merge would allocate a
  // buffer on the sampling thread, which allocates nothing (RELIABILITY.md 39).
  for (size_t i = old; i < table.size(); ++i) {
    const auto at = std::upper_bound(table.begin(), table.begin() + static_cast<ptrdiff_t>(i),
                                     table[i].id, [](pid_t v, const auto& e) { return v < e.id; });
    std::rotate(at, table.begin() + static_cast<ptrdiff_t>(i),
                table.begin() + static_cast<ptrdiff_t>(i) + 1);
  }
}

}  // namespace

bool read_cpu_clock(clockid_t clock, uint64_t& ns) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return false;
  ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  return true;
}

// ---- ThreadTable

bool ThreadTable::open(const std::string& proc_root) {
  proc_root_ = proc_root;
  // Room made on the starting thread (start() opens): listings reuse it.
  threads_.reserve(kRoomThreads);
  tids_.reserve(kRoomThreads);
  ran_.reserve(kRoomThreads);
  max_kept_ = fd_budget();
  process_stat_.open_kept_at(AT_FDCWD, (proc_root + "/self/stat").c_str(), O_RDONLY);
  return dir_.open_kept_at(AT_FDCWD, (proc_root + "/self/task").c_str(), O_RDONLY | O_DIRECTORY) ==
         0;
}

// getdents64 on the kept directory descriptor: no DIR allocation per listing.
bool ThreadTable::list_tids() {
  if (::lseek(dir_.get(), 0, SEEK_SET) != 0) return false;
  tids_.clear();
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir_.get(), dents_, sizeof dents_);
    if (n < 0) return false;
    if (n == 0) break;
    for (long off = 0; off < n;) {
      unsigned short reclen = 0;
      std::memcpy(&reclen, dents_ + off + offsetof(dirent64, d_reclen), sizeof reclen);
      if (reclen == 0) return false;
      if (auto tid = parse_pid(dents_ + off + offsetof(dirent64, d_name))) tids_.push_back(*tid);
      off += reclen;
    }
  }
  std::sort(tids_.begin(), tids_.end());
  return true;
}

void ThreadTable::drop(Thread& t) {
  if (t.stat.valid()) --kept_;
  t.stat.reset();
  t.gone = true;
}

void ThreadTable::keep_stat_open(Thread& t) {
  if (t.stat.valid() && !t.stat.still_ours()) {  // the program closed it
    t.stat.forget();
    --kept_;
  }
  if (t.stat.valid() || kept_ >= max_kept_) return;
  char path[32];
  std::snprintf(path, sizeof path, "%d/stat", static_cast<int>(t.id));
  const int rc = t.stat.open_kept_at(dir_.get(), path, O_RDONLY);
  if (rc == 0) ++kept_;
  if (rc == -ENOENT) drop(t);  // EMFILE/ENFILE: retried at the next relist
}

void ThreadTable::relist(pid_t self) {
  if (process_stat_.valid() && !process_stat_.still_ours()) {  // the program closed it
    process_stat_.forget();
    process_stat_.open_kept_at(AT_FDCWD, (proc_root_ + "/self/stat").c_str(), O_RDONLY);
  }
  if (dir_.valid() && !dir_.still_ours()) dir_.forget();
  if (!dir_.valid() && (proc_root_.empty() || !open(proc_root_))) return;
  if (!list_tids()) return;
  for (auto& t : threads_) {
    if (!t.gone && !std::binary_search(tids_.begin(), tids_.end(), t.id)) drop(t);
  }
  add_listed(threads_, tids_, [this](pid_t id) {
    Thread t;
    t.id = id;
    t.clock = thread_cpu_clock(id);
    threads_.push_back(std::move(t));
  });
  ran_.clear();
  for (auto& t : threads_) {
    if (t.ns_at_relist == kNoValue || t.last_ns != t.ns_at_relist || t.id == self) {
      ran_.push_back(t.id);
    }
    t.ns_at_relist = t.last_ns;
    keep_stat_open(t);
  }
}

// True when some thread may have had a major fault since the last pass, or
// when the total cannot be read (then every thread is read).
bool ThreadTable::process_faults_moved() {
  const ssize_t n = process_stat_.pread_text(text_, sizeof text_);
  const auto total = n > 0 ? parse_uint64(stat_field({text_, static_cast<size_t>(n)}, kMajfltField))
                           : std::nullopt;
  if (!total) return true;
  if (*total == process_faults_) return false;
  process_faults_ = *total;
  return true;
}

void ThreadTable::sample(const CounterSink& sink, pid_t self, bool read_faults) {
  read_faults = read_faults && process_faults_moved();
  for (auto& t : threads_) {
    if (t.gone || t.id == self) continue;
    uint64_t ns = 0;
    if (!read_cpu_clock(t.clock, ns)) {  // exited since the listing
      drop(t);
      continue;
    }
    if (ns != t.last_ns) {
      t.last_ns = ns;
      sink("cpu.thread_ns", static_cast<double>(ns), static_cast<uint64_t>(t.id));
    }
    if (read_faults && ns != t.ns_at_faults) sample_faults(t, sink);
  }
}

// pread on the kept descriptor, or open-read-close past the cap.
ssize_t ThreadTable::read_stat(Thread& t) {
  if (t.stat.valid()) return t.stat.pread_text(text_, sizeof text_);
  char path[32];
  std::snprintf(path, sizeof path, "%d/stat", static_cast<int>(t.id));
  OwnedFd fd;
  if (const int rc = fd.open_at(dir_.get(), path, O_RDONLY); rc != 0) return rc;
  return fd.pread_text(text_, sizeof text_);
}

void ThreadTable::sample_faults(Thread& t, const CounterSink& sink) {
  const ssize_t n = read_stat(t);
  if (n == -ESRCH || n == -ENOENT) {
    drop(t);
    return;
  }
  if (n <= 0) {  // EMFILE and the like: try again at the next pass
    process_faults_ = kNoValue;
    return;
  }
  t.ns_at_faults = t.last_ns;
  const auto faults = parse_uint64(stat_field({text_, static_cast<size_t>(n)}, kMajfltField));
  if (faults && *faults != t.last_faults) {
    t.last_faults = *faults;
    sink("faults.major", static_cast<double>(*faults), static_cast<uint64_t>(t.id));
  }
}

// ---- ChildTable

void ChildTable::read_children_of(int task_dir_fd, pid_t tid) {
  char path[32];
  std::snprintf(path, sizeof path, "%d/children", static_cast<int>(tid));
  OwnedFd fd;
  if (const int rc = fd.open_at(task_dir_fd, path, O_RDONLY); rc != 0) {
    // The thread exists but has no children file: the kernel lacks them.
    std::snprintf(path, sizeof path, "%d", static_cast<int>(tid));
    if (rc == -ENOENT && !probed_ && ::faccessat(task_dir_fd, path, F_OK, 0) == 0)
      supported_ = false;
    return;
  }
  probed_ = true;
  ssize_t n = 0;
  while ((n = fd.pread_text(text_.data(), text_.size())) >= 0 &&
         static_cast<size_t>(n) + 1 >= text_.size() && text_.size() < (1u << 20)) {
    text_.resize(text_.size() * 2);  // thousands of children: rare
  }
  std::string_view rest(text_.data(), n > 0 ? static_cast<size_t>(n) : 0);
  while (!rest.empty()) {
    const size_t sp = rest.find_first_of(" \n");
    if (auto pid = parse_pid(rest.substr(0, sp))) pids_.push_back(*pid);
    rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
  }
}

void ChildTable::relist(int task_dir_fd, const std::vector<pid_t>& tids) {
  if (!supported_ || task_dir_fd < 0) return;
  pids_.clear();
  for (const pid_t tid : tids) read_children_of(task_dir_fd, tid);
  std::sort(pids_.begin(), pids_.end());
  pids_.erase(std::unique(pids_.begin(), pids_.end()), pids_.end());
  add_listed(children_, pids_, [this](pid_t id) {
    Child c;
    c.id = id;
    if (::clock_getcpuclockid(id, &c.clock) == 0) children_.push_back(c);
  });
}

void ChildTable::sample(const CounterSink& sink) {
  for (auto& c : children_) {
    uint64_t ns = 0;
    if (c.gone) continue;
    if (!read_cpu_clock(c.clock, ns)) {  // exited and reaped
      c.gone = true;
      continue;
    }
    if (ns != c.last_ns) {
      c.last_ns = ns;
      sink("cpu.child_ns", static_cast<double>(ns), static_cast<uint64_t>(c.id));
    }
  }
}

}  // namespace stallscope::sys
