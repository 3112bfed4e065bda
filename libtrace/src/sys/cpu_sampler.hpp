// The CPU sampler: a thread in every traced process that records, every
// STALLSCOPE_SAMPLE_MS, per-thread CPU time and major faults, child
// processes' CPU time, idle CPUs of the affinity set and cgroup throttling,
// as counter events on its own track (DESIGN.md "A CPU sampler").
//
//   sys::SamplerOptions o;
//   o.period_ms = 10;
//   o.sink = [](const char* name, double v, uint64_t subject) { /* record */ };
//   sys::CpuSampler s(std::move(o));
//   s.start();   // thread "stallscope-samp", all signals blocked
//   …
//   s.stop();    // returns within one period
//
// Counters (cumulative ones are totals since the thread/process started):
//   cpu.thread_ns       subject tid        cumulative CPU ns of a thread; emitted when changed
//   faults.major        subject tid        cumulative major faults; read every
//                                          `fault_every` ticks, emitted when changed
//   cpu.child_ns        subject child pid  cumulative CPU ns of a direct child; when changed
//   cpu.process_ns      subject 0          cumulative CPU ns of this process; every tick
//   cpu.idle            subject 0          idle CPUs of the affinity set since the previous
//                                          read (a count, 0 … affinity size); every
//                                          `idle_every` ticks (default ~50 ms), from the
//                                          second read on
//   cgroup.nr_throttled subject 0          cumulative, when a CPU cgroup was found; once per
//                                          CFS period (the kernel's update interval,
//                                          cpu.cfs_period_us / cpu.max, 100 ms by default)
//   cgroup.throttled_ns subject 0          cumulative; likewise
//   sampler.cpu_ns      subject 0          cumulative CPU ns of the sampling thread; every tick
//   sampler.period_ms   subject 0          the period in force; at the first tick and after
//                                          each set_period_ms() (the analyzer spreads a
//                                          cumulative counter's increase over one period)
//
// Cost. Per tick: one clock_gettime per thread and per child and of the
// process; /proc/stat every ~50 ms, cpu.stat once per CFS period. Threads are
// re-listed every `relist_ms` (getdents64 on a kept descriptor); children
// then come from the children files of the threads that ran since the last
// listing (forking takes CPU). Reading every thread's stat file would cost
// as much as all the rest, so major faults are read every `fault_every`
// ticks (default: about every 100 ms, every 10th tick at 10 ms), and then only when the
// process's total in /proc/self/stat moved, and only for threads that ran.
// Steady state allocates nothing. bench/sampler_bench.cpp measures it.
//
// Limits. Threads and children are discovered at re-listing (every
// `relist_ms`; after the first tick and after each request_relist(), which
// the recorder calls when the process forks, the gap starts at 20 ms and
// doubles up to `relist_ms`, so threads started with the program are seen
// at once): a thread or a child that lives shorter than that may be
// missed; a child's CPU time is known while it runs (after it is reaped its time moves to the
// process's RUSAGE_CHILDREN, which this sampler does not read). /proc/stat
// counts in 10 ms units, so even a 50 ms cpu.idle is coarse (±0.2 CPU per
// CPU); average it over a step. Without /proc only cpu.process_ns and sampler.cpu_ns are
// recorded.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "stallscope/internal/process_facts.hpp"

namespace stallscope::sys {

// Where samples go: counter name (a stable string literal, see
// docs/trace-format.md "Counters"), value, subject (tid, pid or 0).
// The recorder passes a sink that interns names once and calls
// stallscope::record_counter; tests pass a fake. Called on the sampling
// thread only; an exception from it is caught and the tick abandoned.
using CounterSink = std::function<void(const char* name, double value, uint64_t subject)>;

// Every counter name a sink may see (a sink interns them before the
// sampling thread starts: interning allocates, the thread must not).
inline constexpr const char* kCounterNames[] = {
    "cpu.thread_ns",  "faults.major",   "cpu.child_ns",        "cpu.process_ns",
    "cpu.idle",       "sampler.cpu_ns", "cgroup.nr_throttled", "cgroup.throttled_ns",
    "sampler.period_ms"};

struct SamplerOptions {
  int period_ms = 10;  // clamped to [1, 60000]
  SysPaths paths;
  CounterSink sink;      // empty: samples are taken and dropped
  int relist_ms = 500;   // how often threads and children are re-listed (0: every tick)
  // Major faults read every N ticks (1: every tick). 0: auto, about every
  // 100 ms (every 10th tick at 10 ms, every tick at 100 ms and more).
  int fault_every = 0;
  // /proc/stat read every N ticks; cpu.idle then covers those N periods.
  // 0: auto, a window of about 50 ms (every 5th tick at 10 ms). /proc/stat
  // counts in 10 ms units, so a 10 ms window is mostly rounding, and reading
  // it costs as much as all thread clocks together (more with many CPUs).
  int idle_every = 0;
  // false: cpu.idle and the cgroup counters are not read (they describe the
  // machine and the cgroup, which a sampling parent already reports).
  bool machine_wide = true;
  // Called by start() on the starting thread with the new sampling thread's
  // id, before that thread's first tick (the recorder registers its ring
  // there: the sampling thread allocates nothing, RELIABILITY.md 39).
  std::function<void(pid_t tid)> before_first_tick;
};

struct SamplerStats {
  uint64_t samples = 0;     // ticks taken
  uint64_t own_cpu_ns = 0;  // CPU time of the sampler thread itself
  uint64_t wall_ns = 0;     // since start (to stop, once stopped)
  uint64_t errors = 0;      // ticks abandoned because the sink threw
  uint64_t threads = 0;     // threads in the last listing (the sampler included)
  uint64_t children = 0;    // children in the last listing
};

class CpuSampler {
 public:
  explicit CpuSampler(SamplerOptions opts);
  ~CpuSampler();  // stops
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  // Starts the sampling thread (all signals blocked in it, a small stack:
  // sys/own_thread.hpp). Idempotent. Returns 0, or pthread_create's error
  // (EAGAIN: a process or thread limit), when nothing is sampled.
  int start();
  // Stops and joins; returns promptly (≤ one period, normally at once). In a
  // child forked while the sampler ran, forgets the parent's thread instead.
  void stop();
  // Changes the period (clamped like SamplerOptions::period_ms); the next
  // tick comes one new period from now. Automatic fault_every / idle_every
  // follow the new period. Thread-safe; cheap when the period is unchanged.
  void set_period_ms(int ms);
  int period_ms() const;
  // Switches cpu.idle and the cgroup counters on or off from the next tick.
  void set_machine_wide(bool on);
  // Threads and children are listed again at the next tick (the process
  // just forked: its new child is sampled from then on, not from the next
  // regular listing). Async-signal-safe: one atomic store.
  void request_relist() noexcept;
  // Takes one sample on the calling thread (tests). Safe while the thread
  // runs (ticks are serialized); the calling thread is not sampled as a thread.
  void sample_once();
  SamplerStats stats() const;

 private:
  struct State;
  static void* thread_main(void* self);
  void run();
  void tick();

  SamplerOptions opts_;
  std::unique_ptr<State> state_;
  pthread_t thread_{};
  bool running_ = false;  // thread_ started and not joined
};

}  // namespace stallscope::sys
