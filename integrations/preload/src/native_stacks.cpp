#include "native_stacks.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "native_symbols.hpp"
#include "perf_faults.hpp"
#include "shim.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.h"
#include "stallscope/trace.hpp"
#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::preload {

namespace {

constexpr uint32_t kMaxHz = 1000;
constexpr long kPollMs = 100;
constexpr uint64_t kUserTop = uint64_t{1} << 47;  // user addresses lie below

struct Sampler {
  PerfRings rings;
  NativeSymbols symbols;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;  // one drain at a time
  pid_t pid = 0;
  std::atomic<pid_t> tid{0};  // the drain thread
  std::atomic<bool> stop{false};
  uint64_t interval_ns = 0;
  Ticks pass_ticks = 0;  // one clock pair per pass turns perf's times into ticks
  int64_t pass_ns = 0;
  double ns_per_tick = 1.0;
};

std::atomic<Sampler*> g_sampler{nullptr};
uint32_t g_hz = 0;               // read once by the constructor
bool g_hooks_installed = false;  // atexit and capture hook: once per image
bool g_note_printed = false;     // stderr note: once per process tree
std::atomic<bool> g_mark_pending{false};
char g_refusal[256];

// The configuration table's value (shim.cpp, read once): 0 (off) to kMaxHz
// samples per second of CPU time; a bad value was reported there.
uint32_t wanted_hz() noexcept { return std::min<uint32_t>(config().native_stacks_hz, kMaxHz); }

perf_event_attr stack_attr(uint32_t hz, uint64_t config, size_t ring_bytes) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = config;
  a.freq = 1;  // for the clock events: a fixed period of 1/hz seconds
  a.sample_freq = hz;
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.exclude_callchain_kernel = 1;
  a.sample_max_stack = kMaxNativeFrames;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.watermark = 1;
  a.wakeup_watermark = static_cast<uint32_t>(ring_bytes / 2);
  return a;
}

// Two data pages per CPU (about 26 full-depth samples) up to 64 CPUs, one
// beyond; drained every kPollMs or once a ring is half full.
size_t data_pages_for(size_t cpus) { return cpus <= 64 ? 2 : 1; }

Ticks ticks_of(const Sampler& s, uint64_t ns) noexcept {
  const double d = static_cast<double>(static_cast<int64_t>(ns) - s.pass_ns) / s.ns_per_tick;
  const double t = static_cast<double>(s.pass_ticks) + d;
  return t < 1.0 ? 1 : static_cast<Ticks>(t);
}

// Record layout for IP | TID | TIME | CALLCHAIN: ip, pid, tid, time, nr,
// ips[nr]; the chain holds context markers (PERF_CONTEXT_USER) and, first,
// the sampled ip again.
void on_record(const perf_event_header& h, const void* rec, void* ctx) noexcept {
  struct Head {
    perf_event_header h;
    uint64_t ip;
    uint32_t pid, tid;
    uint64_t time, nr;
  };
  if (h.size < sizeof(Head)) return;
  Sampler& s = *static_cast<Sampler*>(ctx);
  Head head;
  std::memcpy(&head, rec, sizeof head);
  if (head.pid != static_cast<uint32_t>(s.pid) || head.tid == static_cast<uint32_t>(s.tid.load()))
    return;
  const uint64_t room = (h.size - sizeof head) / sizeof(uint64_t);
  const uint64_t nr = head.nr < room ? head.nr : room;
  const auto* chain = reinterpret_cast<const uint8_t*>(rec) + sizeof head;
  NameId frames[kMaxNativeFrames];
  size_t n = 0;
  bool cut = false;
  for (uint64_t i = 0; i < nr; ++i) {
    uint64_t pc;
    std::memcpy(&pc, chain + i * sizeof pc, sizeof pc);
    if (pc >= PERF_CONTEXT_MAX) continue;  // a context marker
    if (pc == 0 || pc >= kUserTop) break;  // the end of a frame-pointer walk, or garbage
    if (n == kMaxNativeFrames) {
      cut = true;
      break;
    }
    // A return address points past its call, possibly into the next function.
    const uint64_t at = n == 0 ? pc : pc - 1;
    frames[n++] = s.symbols.name_of(at);
  }
  if (n == 0 && head.ip != 0 && head.ip < kUserTop) frames[n++] = s.symbols.name_of(head.ip);
  if (n == 0) return;
  StackSample st;
  st.tid = head.tid;
  st.interval_ns = s.interval_ns;
  st.on_cpu = format::OnCpu::kRunning;  // a task-clock sample: the thread was running
  st.flags = static_cast<uint8_t>(format::kStackNative | (cut ? format::kStackTruncated : 0));
  record_stack_sample(ticks_of(s, head.time), st, {frames, n});
}

void drain_pass(Sampler& s) noexcept {
  ::pthread_mutex_lock(&s.mu);
  s.pass_ticks = ticks_now();
  s.pass_ns = mono_ns();
  const uint64_t lost = s.rings.drain(&on_record, &s);
  ::pthread_mutex_unlock(&s.mu);
  if (lost != 0) {
    static const uint32_t name = stallscope_name_intern("native_stacks.lost");
    stallscope_counter_record(name, static_cast<double>(lost), 0);
  }
}

void* drain_main(void* arg) {
  ::prctl(PR_SET_NAME, "stallscope-stack", 0, 0, 0);  // before any shim call: untraced
  Sampler& s = *static_cast<Sampler*>(arg);
  s.tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
  std::vector<pollfd> fds;
  try {
    for (int fd : s.rings.fds()) fds.push_back({fd, POLLIN, 0});
  } catch (...) {  // none: drained every kPollMs
  }
  while (!s.stop.load(std::memory_order_acquire)) {
    timespec timeout{0, kPollMs * 1000000L};
    const long ready = ::syscall(SYS_ppoll, fds.data(), fds.size(), &timeout, nullptr, 0);
    if (s.stop.load(std::memory_order_acquire)) break;  // the exit handler drained last
    if (ready > 0) {
      // A descriptor that hung up or is no longer ours is not polled again
      // (poll keeps sleeping); its ring is still drained through its mapping.
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].fd >= 0 && fds[i].revents != 0 &&
            ((fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0 || !s.rings.still_ours(i)))
          fds[i].fd = -1;
      }
    }
    drain_pass(s);
  }
  return nullptr;
}

Sampler* own_sampler() noexcept {
  Sampler* s = g_sampler.load(std::memory_order_acquire);
  return s != nullptr && s->pid == static_cast<pid_t>(::syscall(SYS_getpid)) ? s : nullptr;
}

// Runs before the recorder's own exit handler (registered earlier): the
// last samples reach the file.
void on_exit() {
  Sampler* s = own_sampler();
  if (s == nullptr) return;
  s->stop.store(true, std::memory_order_release);
  drain_pass(*s);
}

void on_capture(int on) {
  if (Sampler* s = own_sampler()) {
    if (on == 0) drain_pass(*s);  // capture is still on here
  }
  if (on != 0 && g_mark_pending.exchange(false)) stallscope_mark(g_refusal);
}

void install_hooks() noexcept {
  if (g_hooks_installed) return;
  g_hooks_installed = true;
  std::atexit(on_exit);
  stallscope_capture_hook_add(&on_capture);
}

}  // namespace

namespace {

// A short text read with raw system calls ("" when unreadable), up to its
// first newline.
void read_line(const char* path, char* out, size_t n) noexcept {
  out[0] = '\0';
  const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  const long got = ::syscall(SYS_read, fd, out, n - 1);
  ::syscall(SYS_close, fd);
  out[got > 0 ? got : 0] = '\0';
  if (char* nl = std::strchr(out, '\n')) *nl = '\0';
}

// Whether a seccomp filter is installed in this process ("Seccomp: 2").
bool under_seccomp_filter() noexcept {
  char status[4096];
  const long fd = ::syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const long got = ::syscall(SYS_read, fd, status, sizeof status - 1);
  ::syscall(SYS_close, fd);
  status[got > 0 ? got : 0] = '\0';
  const char* at = std::strstr(status, "\nSeccomp:");
  return at != nullptr && std::strtol(at + 9, nullptr, 10) == 2;
}

// The mark in g_refusal (now, or when capture opens) and the same note on
// stderr, once per process tree.
void say_refused() noexcept {
  if (!g_note_printed) {
    g_note_printed = true;
    shim_note(g_refusal);
  }
  if (stallscope_capture_enabled() != 0)
    stallscope_mark(g_refusal);
  else
    g_mark_pending.store(true);
}

void refused(int err) noexcept {
  const char* name = ::strerrorname_np(err);
  char paranoid[32];
  read_line("/proc/sys/kernel/perf_event_paranoid", paranoid, sizeof paranoid);
  std::snprintf(g_refusal, sizeof g_refusal,
                "native stacks: perf_event_open refused (%s; "
                "/proc/sys/kernel/perf_event_paranoid = %s%s); no native stack samples",
                name != nullptr ? name : "error", paranoid[0] != '\0' ? paranoid : "unreadable",
                under_seccomp_filter() ? "; a seccomp filter is installed" : "");
  say_refused();
}

// One descriptor per CPU: taken only while that is at most an eighth of
// RLIMIT_NOFILE, so the program keeps its descriptors.
bool within_descriptor_share() noexcept {
  const size_t need = online_cpus().size();
  const uint64_t limit = sys::nofile_limit();
  if (need <= limit / 8) return true;
  std::snprintf(g_refusal, sizeof g_refusal,
                "native stacks: not sampled: %zu descriptors (one per CPU) would be more than an "
                "eighth of RLIMIT_NOFILE (%llu)",
                need, static_cast<unsigned long long>(limit));
  say_refused();
  return false;
}

// Task clock first (the thread's own CPU time); the CPU clock where a
// kernel refuses it as an argument.
int open_rings(Sampler& s, uint32_t hz) noexcept {
  const size_t pages = data_pages_for(online_cpus().size());
  const size_t bytes = pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  perf_event_attr a = stack_attr(hz, PERF_COUNT_SW_TASK_CLOCK, bytes);
  int rc = s.rings.open(a, pages);
  if (rc == -EINVAL || rc == -ENOENT || rc == -EOPNOTSUPP) {
    a = stack_attr(hz, PERF_COUNT_SW_CPU_CLOCK, bytes);
    rc = s.rings.open(a, pages);
  }
  return rc;
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

void start_now() noexcept {
  if (g_hz == 0 || stallscope_init() != 0) return;
  install_hooks();
  auto* s = new (std::nothrow) Sampler;
  if (s == nullptr) return;
  s->pid = static_cast<pid_t>(::syscall(SYS_getpid));
  s->interval_ns = 1000000000ull / g_hz;
  s->ns_per_tick = ns_per_tick();
  if (!within_descriptor_share()) {
    delete s;
    return;
  }
  const int rc = open_rings(*s, g_hz);
  if (rc != 0) {
    refused(-rc);
    delete s;
    return;
  }
  if (!start_thread(s)) {
    refused(EAGAIN);
    s->rings.close();
    delete s;
    return;
  }
  g_sampler.store(s, std::memory_order_release);
}

}  // namespace

void native_stacks_start() noexcept {
  g_hz = wanted_hz();
  const int saved = errno;
  start_now();
  errno = saved;
}

void native_stacks_forget_after_fork() noexcept {
  // Abandoned, not destroyed: its thread does not exist here and may have
  // held its lock or been mid-update when the fork came.
  Sampler* s = g_sampler.exchange(nullptr);
  if (s == nullptr) return;  // (called twice per fork: by the atfork handler and the wrapper)
  s->rings.forget_after_fork();
}

void native_stacks_after_fork_child() noexcept {
  const int saved = errno;
  start_now();
  errno = saved;
}

}  // namespace stallscope::preload
