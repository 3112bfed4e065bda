// Whether other processes keep this machine's CPUs busy right now: the
// premise of the tests that measure shares of step time on real runs
// (RELIABILITY.md 38). Without Boost.Test, for the scenario runner too;
// the Boost.Test suites use it through cpu_premise.hpp.
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace stallscope::test {

namespace detail {

// Spins for `ms` of wall time; the share of a core this thread got.
inline double spin_share(int ms) {
  auto cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_ns();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(ms)) {
  }
  const double wall =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return (cpu_ns() - c0) / wall;
}

}  // namespace detail

// Spins `threads` threads (at most the CPUs this process may use) for `ms`
// of wall time: "" when they got at least 3/4 of a core each on average,
// else a sentence saying what they got.
inline std::string cpus_busy(unsigned threads, int ms = 300) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  threads = std::clamp(threads, 1u, static_cast<unsigned>(std::max(cpus, 1)));
  std::vector<double> got(threads);
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < threads; ++i)
    spinners.emplace_back([&got, i, ms] { got[i] = detail::spin_share(ms); });
  for (auto& t : spinners) t.join();
  double mean = 0;
  for (const double g : got) mean += g / threads;
  if (mean >= 0.75) return "";
  char text[200];
  std::snprintf(text, sizeof text,
                "%u CPU-bound threads got %.2f of a core each: other processes keep this "
                "machine's CPUs busy",
                threads, mean);
  return text;
}

}  // namespace stallscope::test
