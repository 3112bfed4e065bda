#include "fault_sampler.hpp"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>
#include <vector>

#include "mapped_files.hpp"
#include "perf_faults.hpp"
#include "shim.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"
#include "stallscope/internal/config.hpp"
#include "stallscope/internal/fd_limits.hpp"
#include "wake_pipe.hpp"

namespace cfg = ::stallscope::config;

namespace stallscope::preload {

namespace {

// The drain thread wakes when 64 samples wait in a ring (1024 fit), on a
// request, else after this long.
constexpr long kPollMs = 100;
constexpr int64_t kNominalNs = 100000;  // drawn length of one fault (docs/attach-preload.md)
constexpr int kExitWaitMs = 1000;       // bound on the last drain at exit
constexpr int kCaptureOffWaitMs = 100;  // bound on the drain when capture closes
constexpr size_t kMaxThreads = 4096;    // threads whose last fault time is kept

struct Sampler {
  PerfFaultEvents events;
  MappedFiles files;
  WakePipe wake;  // drain or stop requests
  pid_t pid = 0;
  std::atomic<pid_t> tid{0};  // the drain thread (its own faults are not reads)
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> requested{0}, done{0};
  std::unordered_map<uint32_t, Ticks> last_end;  // tid -> end of its last fault
  // One clock pair per drain pass turns perf's CLOCK_MONOTONIC times into
  // ticks; samples are at most a pass old, so the rate error is nil.
  Ticks pass_ticks = 0;
  int64_t pass_ns = 0;
  double ns_per_tick = 1.0;
  uint64_t page = 4096;
};

std::atomic<Sampler*> g_sampler{nullptr};
std::atomic<bool> g_armed{false};          // wanted in this process, not started yet
std::atomic<pid_t> g_started_pid{0};       // the process whose sampler was started
bool g_parent_had_sampler = false;         // fork child: set by forget_after_fork
bool g_hooks_installed = false;  // atexit and capture hook: once per image, kept by forks
bool g_note_printed = false;     // stderr note: once per process tree
std::atomic<bool> g_mark_pending{false};
char g_refusal[224];

bool wanted() noexcept {
  char why[cfg::kMessageBytes];
  const bool on = cfg::env_switch(cfg::Id::kMmapFaults, why, sizeof why);
  if (why[0] != '\0') shim_note(why);
  return on;
}

Ticks ticks_of(const Sampler& s, uint64_t ns) noexcept {
  const double d = static_cast<double>(static_cast<int64_t>(ns) - s.pass_ns) / s.ns_per_tick;
  const double t = static_cast<double>(s.pass_ticks) + d;
  return t < 2.0 ? 2 : static_cast<Ticks>(t);
}

// A fault has no duration of its own (a point sample taken when the kernel
// finished it): drawn as kNominalNs ending then, never longer than the
// time since the same thread's previous fault ended.
Ticks drawn_ticks(Sampler& s, uint32_t tid, Ticks end) {
  Ticks dur = static_cast<Ticks>(static_cast<double>(kNominalNs) / s.ns_per_tick);
  if (s.last_end.size() > kMaxThreads) s.last_end.clear();
  Ticks& last = s.last_end[tid];
  if (last != 0 && end > last && end - last < dur) dur = end - last;
  if (end > last) last = end;
  if (dur == 0) dur = 1;
  return dur < end ? dur : end - 1;
}

void on_sample(const FaultSample& f, void* ctx) noexcept {
  Sampler& s = *static_cast<Sampler*>(ctx);
  if (f.pid != static_cast<uint32_t>(s.pid) || f.tid == static_cast<uint32_t>(s.tid.load())) return;
  FileHit hit;
  if (!s.files.resolve(f.addr, s.pass_ns, &hit)) return;  // anonymous memory, code
  try {
    const Ticks end = ticks_of(s, f.mono_ns);
    StorageRead r;
    r.file = hit.file;
    r.bytes = s.page;
    r.offset = hit.offset;
    r.tier = static_cast<format::Tier>(hit.tier);
    r.cache = format::Cache::kMiss;
    r.cache_method = format::CacheMethod::kFault;
    r.batch_id = f.tid;  // corr: the faulting thread (also the track's tid)
    record_storage_read_for(f.tid, end - drawn_ticks(s, f.tid, end), end, r);
  } catch (...) {  // out of memory in the thread table: this sample is lost
  }
}

void drain_pass(Sampler& s) noexcept {
  s.pass_ticks = ticks_now();
  s.pass_ns = mono_ns();
  const uint64_t lost = s.events.drain(&on_sample, &s);
  if (lost != 0) {
    static const uint32_t name = stallscope_name_intern("faults.major_lost");
    stallscope_counter_record(name, static_cast<double>(lost), 0);
  }
}

std::vector<pollfd> poll_set(const Sampler& s) noexcept {
  std::vector<pollfd> fds;
  try {
    fds.push_back({s.wake.read_fd(), POLLIN, 0});
    for (int fd : s.events.fds()) fds.push_back({fd, POLLIN, 0});
  } catch (...) {  // none: drained every kPollMs
  }
  return fds;
}

// After poll: a descriptor that hung up (its task is gone) or is no longer
// ours (closed and reused by the program) is not polled again, so that poll
// keeps sleeping; the rings are still drained through their mappings.
void screen(Sampler& s, std::vector<pollfd>& fds) noexcept {
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    const bool gone = (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
    const bool ours = i == 0 ? s.wake.clear() : s.events.still_ours(i - 1);
    if (gone || !ours) fds[i].fd = -1;
  }
}

void* drain_main(void* arg) {
  ::prctl(PR_SET_NAME, "stallscope-mmap", 0, 0, 0);  // before any shim call: untraced
  Sampler& s = *static_cast<Sampler*>(arg);
  s.tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
  std::vector<pollfd> fds = poll_set(s);
  while (!s.stop.load(std::memory_order_acquire)) {
    timespec timeout{0, kPollMs * 1000000L};  // the system call writes back what is left
    if (s.requested.load(std::memory_order_acquire) == s.done.load(std::memory_order_relaxed) &&
        ::syscall(SYS_ppoll, fds.data(), fds.size(), &timeout, nullptr, 0) > 0) {
      screen(s, fds);
    }
    const uint64_t req = s.requested.load(std::memory_order_acquire);
    drain_pass(s);
    s.done.store(req, std::memory_order_release);
  }
  return nullptr;
}

// Asks the drain thread for a pass and waits up to `ms` for it.
void drain_and_wait(Sampler& s, int ms) noexcept {
  const uint64_t want = s.requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  s.wake.wake();
  const timespec step{0, 1000000L};
  for (int i = 0; i < ms && s.done.load(std::memory_order_acquire) < want; ++i) {
    ::nanosleep(&step, nullptr);
  }
}

Sampler* own_sampler() noexcept {
  Sampler* s = g_sampler.load(std::memory_order_acquire);
  return s != nullptr && s->pid == static_cast<pid_t>(::syscall(SYS_getpid)) ? s : nullptr;
}

// Runs before the recorder's own exit handler (registered earlier), so the
// last samples reach the file.
void on_exit() {
  Sampler* s = own_sampler();
  if (s == nullptr) return;
  drain_and_wait(*s, kExitWaitMs);
  s->stop.store(true, std::memory_order_release);
  s->wake.wake();
}

void on_capture(int on) {
  if (Sampler* s = own_sampler()) {
    if (on == 0) drain_and_wait(*s, kCaptureOffWaitMs);  // capture is still on here
  }
  if (on != 0 && g_mark_pending.exchange(false)) stallscope_mark(g_refusal);
}

// The note and mark in g_refusal, once.
void say_refused() noexcept {
  if (!g_note_printed) {
    g_note_printed = true;
    shim_note(g_refusal);
  }
  if (stallscope_capture_enabled() != 0) {
    stallscope_mark(g_refusal);
  } else {
    g_mark_pending.store(true);
  }
}

void refused(int err) noexcept {
  const char* name = ::strerrorname_np(err);
  std::snprintf(g_refusal, sizeof g_refusal,
                "memory-mapped reads not traced: perf_event_open(major page faults) failed "
                "(%s); only per-thread major-fault counts are recorded, without their files",
                name != nullptr ? name : "error");
  say_refused();
}

// One descriptor per CPU and the wake pipe: taken only while that is at
// most an eighth of RLIMIT_NOFILE, so the program keeps its descriptors
// (stallscope/internal/fd_limits.hpp).
bool within_descriptor_share() noexcept {
  const size_t need = online_cpus().size() + 2;
  const uint64_t limit = sys::nofile_limit();
  if (need <= limit / 8) return true;
  std::snprintf(g_refusal, sizeof g_refusal,
                "memory-mapped reads not traced: sampling their faults takes %zu descriptors "
                "(one per CPU, and 2), more than an eighth of RLIMIT_NOFILE (%llu); only "
                "per-thread major-fault counts are recorded",
                need, static_cast<unsigned long long>(limit));
  say_refused();
  return false;
}

bool start_thread(Sampler* s) noexcept {
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);  // the program's signals never reach it
  pthread_attr_t attr;
  ::pthread_attr_init(&attr);
  ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  ::pthread_attr_setstacksize(&attr, 256u << 10);
  pthread_t t;
  const int rc = ::pthread_create(&t, &attr, drain_main, s);
  ::pthread_attr_destroy(&attr);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc == 0;
}

void install_hooks() noexcept {
  if (g_hooks_installed) return;
  g_hooks_installed = true;
  std::atexit(on_exit);
  stallscope_capture_hook_add(&on_capture);
}

}  // namespace

namespace {

void start_now() noexcept {
  if (stallscope_init() != 0) return;
  install_hooks();
  auto* s = new (std::nothrow) Sampler;
  if (s == nullptr) return;
  s->pid = static_cast<pid_t>(::syscall(SYS_getpid));
  s->page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  s->ns_per_tick = ns_per_tick();
  if (!within_descriptor_share()) {
    delete s;
    return;
  }
  const int rc = s->events.open();
  if (rc != 0) {
    refused(-rc);
    delete s;
    return;
  }
  if (!s->wake.open() || !start_thread(s)) {
    refused(EAGAIN);
    s->events.close();
    s->wake.close();
    delete s;
    return;
  }
  g_sampler.store(s, std::memory_order_release);
}

}  // namespace

void fault_sampler_arm() noexcept {
  g_armed.store(wanted(), std::memory_order_release);
}

void fault_sampler_on_mapping() noexcept {
  if (!g_armed.load(std::memory_order_acquire)) return;
  const auto pid = static_cast<pid_t>(::syscall(SYS_getpid));
  if (g_started_pid.load(std::memory_order_acquire) == pid) return;
  if (g_started_pid.exchange(pid, std::memory_order_acq_rel) == pid) return;  // another thread won
  g_armed.store(false, std::memory_order_release);
  start_now();
}

void fault_sampler_after_fork_child() noexcept {
  const bool inherit = g_parent_had_sampler;
  g_parent_had_sampler = false;
  g_started_pid.store(0, std::memory_order_release);
  fault_sampler_arm();
  if (inherit) fault_sampler_on_mapping();  // the parent's mappings are the child's
}

void fault_sampler_forget_after_fork() noexcept {
  // The parent's sampler object is abandoned, not destroyed: its thread
  // does not exist here and may have been mid-update when the fork came.
  Sampler* s = g_sampler.exchange(nullptr);
  if (s == nullptr) return;  // (called twice per fork: by the atfork handler and the wrapper)
  g_parent_had_sampler = true;
  s->events.forget_after_fork();
  s->wake.close();
}

}  // namespace stallscope::preload
