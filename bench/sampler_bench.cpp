// sampler_bench: what the CPU sampler costs the traced process.
//
// Spawns N mostly-sleeping threads (default 60; each wakes every 5–50 ms and
// works ~20 µs, like data-loader and runtime helper threads), runs the
// sampler with a no-op sink for a few seconds at the given period and prints
// the sampler thread's own CPU time as a percentage of one core:
//
//   sampler_cpu_pct = sampler thread CPU ns / wall ns × 100
//
// beside a reference measured in the same run: a thread that only wakes up
// on the same period and does nothing (the floor any periodic sampler pays),
// the same sampler making its fault pass on every tick instead of every 10th,
// and reading /proc/stat on every tick instead of every ~50 ms (why the
// defaults do both less often).
//
//   sampler_bench [--threads 60] [--period-ms 10] [--seconds 3]
//   -> RESULT sampler_cpu_60_threads <pct> % target <= 1.0 PASS|MISS
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sys/cpu_sampler.hpp"

using namespace std::chrono;
using stallscope::sys::CpuSampler;
using stallscope::sys::SamplerOptions;

namespace {

constexpr double kTargetPct = 1.0;

struct Args {
  int threads = 60;
  int period_ms = 10;
  double seconds = 3.0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      a.threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--period-ms"))
      a.period_ms = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds"))
      a.seconds = std::atof(argv[i + 1]);
    else
      std::fprintf(stderr, "sampler_bench: unknown option %s (ignored)\n", argv[i]);
  }
  return a;
}

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The load: threads that mostly sleep.
class Sleepers {
 public:
  explicit Sleepers(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { body(i); });
  }
  ~Sleepers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  void body(int seed) {
    std::minstd_rand rng(static_cast<unsigned>(seed) + 1);
    volatile uint64_t sink = 0;
    while (!stop_) {
      std::this_thread::sleep_for(milliseconds(5 + rng() % 46));
      const uint64_t t0 = thread_cpu_ns();
      while (thread_cpu_ns() - t0 < 20000) sink = sink + 1;
    }
  }
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Reference: a thread that wakes every period and does nothing else.
double empty_wakeup_pct(int period_ms, double seconds) {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t cpu = 0;
  const auto t0 = steady_clock::now();
  std::thread t([&] {
    auto next = steady_clock::now();
    std::unique_lock<std::mutex> lk(mu);
    while (steady_clock::now() - t0 < duration<double>(seconds)) {
      next += milliseconds(period_ms);
      cv.wait_until(lk, next, [] { return false; });
    }
    cpu = thread_cpu_ns();
  });
  t.join();
  const double wall = duration<double, std::nano>(steady_clock::now() - t0).count();
  return 100.0 * static_cast<double>(cpu) / wall;
}

struct Run {
  double pct = 0;
  double us_per_tick = 0;
  uint64_t ticks = 0;
  uint64_t threads = 0;
};

Run run_sampler(const Args& a, int fault_every, int idle_every) {
  SamplerOptions o;
  o.period_ms = a.period_ms;
  o.fault_every = fault_every;
  o.idle_every = idle_every;
  o.sink = [](const char*, double, uint64_t) {};
  CpuSampler s(std::move(o));
  s.start();
  std::this_thread::sleep_for(duration<double>(a.seconds));
  s.stop();
  const auto st = s.stats();
  Run r;
  r.ticks = st.samples;
  r.threads = st.threads;
  r.pct =
      st.wall_ns ? 100.0 * static_cast<double>(st.own_cpu_ns) / static_cast<double>(st.wall_ns) : 0;
  r.us_per_tick =
      st.samples ? static_cast<double>(st.own_cpu_ns) / 1e3 / static_cast<double>(st.samples) : 0;
  return r;
}

void print_run(const char* what, const Run& r) {
  std::printf("%-36s %8.3f %% of one core  %7.1f us/tick  %5llu ticks  %3llu threads listed\n",
              what, r.pct, r.us_per_tick, static_cast<unsigned long long>(r.ticks),
              static_cast<unsigned long long>(r.threads));
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  std::printf("sampler_bench: %d sleeping threads, period %d ms, %.1f s per run\n", a.threads,
              a.period_ms, a.seconds);
  std::printf("sampler_cpu_pct = sampler thread CPU ns / wall ns x 100\n");
  Sleepers load(a.threads);
  std::this_thread::sleep_for(milliseconds(100));  // let them all start
  const double floor_pct = empty_wakeup_pct(a.period_ms, a.seconds);
  std::printf("%-36s %8.3f %% of one core\n", "reference: empty wakeup loop", floor_pct);
  const SamplerOptions defaults;
  const Run every = run_sampler(a, 1, defaults.idle_every);
  print_run("sampler, fault pass every tick", every);
  const Run fast_idle = run_sampler(a, defaults.fault_every, 1);
  print_run("sampler, /proc/stat every tick", fast_idle);
  const Run dflt = run_sampler(a, defaults.fault_every, defaults.idle_every);
  print_run("sampler, defaults", dflt);
  std::printf("ratio default / empty wakeup: %.1fx\n", floor_pct > 0 ? dflt.pct / floor_pct : 0.0);
  std::printf("RESULT sampler_cpu_%d_threads %.3f %% target <= %.1f %s\n", a.threads, dflt.pct,
              kTargetPct, dflt.pct <= kTargetPct ? "PASS" : "MISS");
  return 0;
}
