// The sampling thread and one tick. The tables it reads live in
// sampler_tables.cpp (threads, children) and idle_cpus.cpp (/proc/stat).
#include "sys/cpu_sampler.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "stallscope/clock.hpp"
#include "stallscope/internal/idle_cpus.hpp"
#include "stallscope/internal/proc_text.hpp"
#include "sys/own_thread.hpp"
#include "sys/sampler_tables.hpp"

namespace stallscope::sys {
namespace {

// Linux thread names hold 15 bytes: "stallscope-sampler" would be refused.
constexpr const char* kThreadName = "stallscope-samp";
constexpr int kMaxPeriodMs = 60000;
constexpr int kIdleWindowMs = 50;  // default /proc/stat window, see idle_every
constexpr int64_t kFirstRelistNs = 20'000'000;  // the first gap between thread listings
constexpr int kFaultWindowMs = 100;  // default major-fault interval, see fault_every

int clamp_period(int ms) { return std::clamp(ms, 1, kMaxPeriodMs); }
// Ticks in about `window_ms` at `period_ms` (at least one).
int ticks_in(int window_ms, int period_ms) {
  return std::max(1, (window_ms + period_ms / 2) / period_ms);
}

}  // namespace

struct CpuSampler::State {
  // Thread control.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;    // guarded by mu
  bool period_changed = false;  // guarded by mu: the run loop restarts its wait
  std::atomic<int> period_ms{10};
  std::atomic<bool> machine_wide{true};
  std::atomic<bool> relist_requested{false};
  pid_t owner_pid = 0;  // the process that started the thread
  // The thread's start handshake: it publishes its id, then waits for `go`
  // (guarded by mu) while the starting thread runs before_first_tick.
  std::atomic<pid_t> thread_tid{0};
  bool go = false;
  // Sampling state, touched only under tick_mu.
  std::mutex tick_mu;
  bool opened = false;
  ThreadTable threads;
  ChildTable children;
  IdleCpuMeter idle;
  AffinityReader affinity_reader;
  std::vector<int> affinity;
  CgroupCpu cgroup;
  OwnedFd cgroup_stat;
  int cgroup_every = 1;  // ticks per CFS period
  int idle_every = 1;    // in force (SamplerOptions::idle_every, or auto)
  int fault_every = 1;   // in force (SamplerOptions::fault_every, or auto)
  int emitted_period_ms = 0;  // the last sampler.period_ms recorded
  char cgroup_text[2048];
  int64_t last_relist_ns = 0;
  int64_t relist_gap_ns = 0;  // grows from kFirstRelistNs to relist_ms
  uint64_t ticks = 0;
  // Published for stats().
  std::atomic<uint64_t> samples{0}, own_cpu_ns{0}, errors{0}, n_threads{0}, n_children{0};
  std::atomic<int64_t> start_ns{0}, stop_ns{0};

  void open(const SysPaths& p);
  void open_machine_wide(const SysPaths& p);
  bool opened_wide = false;
  void set_cadence(const SamplerOptions& o, int period);
  void relist(pid_t self, bool forked = false);
  void sample_process(const CounterSink& sink, bool read_idle, bool read_cgroup);
  bool every(int n) const { return ticks % static_cast<uint64_t>(n) == 0; }
  void sample_cgroup(const CounterSink& sink);
};

// Opened by start() or the first tick, so constructing a sampler does no I/O.
// Each source that fails to open is simply absent.
void CpuSampler::State::open(const SysPaths& p) {
  opened = true;
  threads.open(p.proc);
  children.reserve(ThreadTable::kRoomThreads);
}

// The machine-wide sources, at the first tick that reads them.
void CpuSampler::State::open_machine_wide(const SysPaths& p) {
  opened_wide = true;
  idle.open(p.proc);
  cgroup = read_cgroup_cpu(p);
  const std::string stat_file = cgroup_cpu_stat_file(cgroup);
  if (!stat_file.empty()) cgroup_stat.open_kept_at(AT_FDCWD, stat_file.c_str(), O_RDONLY);
  // Sized here, on the starting thread: the ticks reuse the room.
  if (affinity_reader.read(::getpid(), affinity)) idle.set_cpus(affinity);
}

// How many ticks apart the slower sources are read, at `period` ms.
void CpuSampler::State::set_cadence(const SamplerOptions& o, int period) {
  idle_every = o.idle_every > 0 ? o.idle_every : ticks_in(kIdleWindowMs, period);
  fault_every = o.fault_every > 0 ? o.fault_every : ticks_in(kFaultWindowMs, period);
  // The kernel updates throttling counters once per CFS period (100 ms by
  // default): reading cpu.stat more often learns nothing.
  const int64_t cfs_period_us = cgroup.period_us > 0 ? cgroup.period_us : 100000;
  cgroup_every =
      static_cast<int>(std::clamp<int64_t>(cfs_period_us / (int64_t{period} * 1000), 1, 1000));
}

void CpuSampler::State::relist(pid_t self, bool forked) {
  threads.relist(self);
  // After a fork every thread's children are read: the forking thread may
  // not have used CPU since a listing a few milliseconds earlier.
  children.relist(threads.dir_fd(), forked ? threads.listed() : threads.ran_since_relist());
  if (opened_wide) {
    // The main thread's set (taskset or the program may change it).
    if (affinity_reader.read(::getpid(), affinity)) idle.set_cpus(affinity);
    idle.revalidate();
    if (cgroup_stat.valid() && !cgroup_stat.still_ours()) {
      cgroup_stat.forget();  // the program closed it; reopen a descriptor of our own
      cgroup_stat.open_kept_at(AT_FDCWD, cgroup_cpu_stat_file(cgroup).c_str(), O_RDONLY);
    }
  }
  n_threads.store(threads.size(), std::memory_order_relaxed);
  n_children.store(children.size(), std::memory_order_relaxed);
}

void CpuSampler::State::sample_cgroup(const CounterSink& sink) {
  if (!cgroup_stat.valid()) return;
  const ssize_t n = cgroup_stat.pread_text(cgroup_text, sizeof cgroup_text);
  if (n <= 0) return;
  parse_cgroup_cpu_stat({cgroup_text, static_cast<size_t>(n)}, cgroup.version, cgroup);
  sink("cgroup.nr_throttled", static_cast<double>(cgroup.nr_throttled), 0);
  sink("cgroup.throttled_ns", static_cast<double>(cgroup.throttled_ns), 0);
}

void CpuSampler::State::sample_process(const CounterSink& sink, bool read_idle,
                                       bool read_cgroup) {
  uint64_t ns = 0;
  if (read_cpu_clock(CLOCK_PROCESS_CPUTIME_ID, ns))
    sink("cpu.process_ns", static_cast<double>(ns), 0);
  if (const auto idle_cpus = read_idle ? idle.sample() : std::nullopt) {
    sink("cpu.idle", *idle_cpus, 0);
  }
  if (read_cgroup && every(cgroup_every)) sample_cgroup(sink);
  // Last, so that it includes this tick's own cost.
  if (read_cpu_clock(CLOCK_THREAD_CPUTIME_ID, ns)) {
    own_cpu_ns.store(ns, std::memory_order_relaxed);
    sink("sampler.cpu_ns", static_cast<double>(ns), 0);
  }
}

CpuSampler::CpuSampler(SamplerOptions opts) : opts_(std::move(opts)), state_(new State) {
  opts_.period_ms = clamp_period(opts_.period_ms);
  opts_.relist_ms = std::max(opts_.relist_ms, 0);
  opts_.fault_every = std::max(opts_.fault_every, 0);
  opts_.idle_every = std::max(opts_.idle_every, 0);
  if (!opts_.sink) opts_.sink = [](const char*, double, uint64_t) {};
  state_->period_ms.store(opts_.period_ms, std::memory_order_relaxed);
  state_->machine_wide.store(opts_.machine_wide, std::memory_order_relaxed);
}

void CpuSampler::request_relist() noexcept {
  state_->relist_requested.store(true, std::memory_order_relaxed);
}

void CpuSampler::set_machine_wide(bool on) {
  state_->machine_wide.store(on, std::memory_order_relaxed);
}

void CpuSampler::set_period_ms(int ms) {
  ms = clamp_period(ms);
  if (state_->period_ms.exchange(ms, std::memory_order_relaxed) == ms) return;
  if (running_ && state_->owner_pid != ::getpid()) return;  // forked child, see stop()
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->period_changed = true;
  }
  state_->cv.notify_all();
}

int CpuSampler::period_ms() const { return state_->period_ms.load(std::memory_order_relaxed); }

CpuSampler::~CpuSampler() { stop(); }

int CpuSampler::start() {
  if (running_) return 0;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stop = false;
    state_->period_changed = false;  // the first tick comes at once anyway
  }
  state_->start_ns = mono_ns();
  state_->stop_ns = 0;
  state_->owner_pid = ::getpid();
  {
    // The files kept open are opened here, on the starting thread (the
    // shim's constructor, before main), not on the new thread while the
    // program runs: its own first descriptors keep the numbers it expects.
    std::lock_guard<std::mutex> lk(state_->tick_mu);
    if (!state_->opened) state_->open(opts_.paths);
    if (state_->machine_wide.load(std::memory_order_relaxed) && !state_->opened_wide)
      state_->open_machine_wide(opts_.paths);
  }
  // Every signal blocked from the thread's start: the program's handlers
  // never run on it. No thread (a process or thread limit): sample nothing.
  state_->thread_tid.store(0);
  state_->go = false;
  const int err = start_own_thread(&thread_, &CpuSampler::thread_main, this);
  running_ = err == 0;
  if (err != 0) return err;
  pid_t tid = 0;
  for (int waited_us = 0; (tid = state_->thread_tid.load()) == 0 && waited_us < 2000000;
       waited_us += 50) {
    timespec ts{0, 50000};
    nanosleep(&ts, nullptr);
  }
  try {
    if (tid != 0 && opts_.before_first_tick) opts_.before_first_tick(tid);
  } catch (...) {  // the sink registers on its thread instead
    state_->errors.fetch_add(1, std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->go = true;
  }
  state_->cv.notify_all();
  return 0;
}

void* CpuSampler::thread_main(void* self) {
  auto* sampler = static_cast<CpuSampler*>(self);
  State& s = *sampler->state_;
  s.thread_tid.store(::gettid());
  {
    std::unique_lock<std::mutex> lk(s.mu);
    s.cv.wait(lk, [&s] { return s.go || s.stop; });
  }
  sampler->run();
  return nullptr;
}

void CpuSampler::stop() {
  if (!running_) return;
  running_ = false;
  // Forked child: the thread does not exist here and the mutexes may have
  // been copied locked. Touch neither.
  if (state_->owner_pid != ::getpid()) return;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  pthread_join(thread_, nullptr);
  state_->stop_ns = mono_ns();
}

void CpuSampler::run() {
  State& s = *state_;
  pthread_setname_np(pthread_self(), kThreadName);
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(s.mu);
  while (!s.stop) {
    lk.unlock();
    sample_once();
    lk.lock();
    const auto period = std::chrono::milliseconds(s.period_ms.load(std::memory_order_relaxed));
    next += period;
    const auto now = std::chrono::steady_clock::now();
    if (next <= now) next = now + period;  // overran (suspended?): skip, never burst
    s.cv.wait_until(lk, next, [&s] { return s.stop || s.period_changed; });
    if (s.period_changed) {  // sample at once, then every new period
      s.period_changed = false;
      next = std::chrono::steady_clock::now();
    }
  }
}

void CpuSampler::sample_once() {
  std::lock_guard<std::mutex> lk(state_->tick_mu);
  try {
    tick();
  } catch (...) {  // the sink threw (or allocation failed): lose this tick only
    state_->errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void CpuSampler::tick() {
  State& s = *state_;
  if (!s.opened) s.open(opts_.paths);
  const int period = s.period_ms.load(std::memory_order_relaxed);
  if (period != s.emitted_period_ms) {
    s.set_cadence(opts_, period);
    s.ticks = 0;  // the slower sources restart their count (and relist at once)
    s.emitted_period_ms = period;
    opts_.sink("sampler.period_ms", static_cast<double>(period), 0);
  }
  const bool wide = s.machine_wide.load(std::memory_order_relaxed);
  const bool open_wide = wide && !s.opened_wide;
  if (open_wide) {
    s.open_machine_wide(opts_.paths);
    s.set_cadence(opts_, period);  // cgroup_every needs the CFS period
  }
  const pid_t self = ::gettid();
  const int64_t now = mono_ns();
  const bool asked = s.relist_requested.exchange(false, std::memory_order_relaxed);
  // Programs start their loader threads right after starting: the gap
  // between listings starts short and doubles up to relist_ms (again after
  // a fork), so a thread made in the first milliseconds is sampled from
  // then on, not from the first full relist_ms.
  const int64_t full = int64_t{opts_.relist_ms} * 1000000;
  if (s.relist_gap_ns == 0 || asked) s.relist_gap_ns = std::min(kFirstRelistNs, full);
  if (s.ticks == 0 || open_wide || asked || now - s.last_relist_ns >= s.relist_gap_ns) {
    if (s.ticks != 0 && !asked) s.relist_gap_ns = std::min(2 * s.relist_gap_ns, full);
    s.relist(self, asked);
    s.last_relist_ns = now;
  }
  s.threads.sample(opts_.sink, self, s.every(s.fault_every));
  s.children.sample(opts_.sink);
  s.sample_process(opts_.sink, wide && s.every(s.idle_every), wide);
  ++s.ticks;
  s.samples.fetch_add(1, std::memory_order_relaxed);
}

SamplerStats CpuSampler::stats() const {
  const State& s = *state_;
  SamplerStats st;
  st.samples = s.samples.load(std::memory_order_relaxed);
  st.own_cpu_ns = s.own_cpu_ns.load(std::memory_order_relaxed);
  st.errors = s.errors.load(std::memory_order_relaxed);
  st.threads = s.n_threads.load(std::memory_order_relaxed);
  st.children = s.n_children.load(std::memory_order_relaxed);
  const int64_t start = s.start_ns.load(), stop = s.stop_ns.load();
  if (start != 0) st.wall_ns = static_cast<uint64_t>((stop != 0 ? stop : mono_ns()) - start);
  return st;
}

}  // namespace stallscope::sys
