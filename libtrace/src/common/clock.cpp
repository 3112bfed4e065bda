// Clock sampling and tick-to-nanosecond conversion (see clock.hpp).
#include "stallscope/clock.hpp"

#include <cstdio>
#include <cstring>

namespace stallscope {

namespace detail {
bool g_ticks_are_tsc = false;
}  // namespace detail

bool detect_invariant_tsc() noexcept {
#if STALLSCOPE_HAVE_RDTSC
  FILE* f = std::fopen("/proc/cpuinfo", "re");
  if (f == nullptr) return false;
  char line[8192];
  bool constant = false, nonstop = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    constant = std::strstr(line, " constant_tsc") != nullptr;
    nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
    break;  // the first CPU's flags stand for all
  }
  std::fclose(f);
  return constant && nonstop;
#else
  return false;
#endif
}

format::ClockTriple sample_clock_triple() noexcept {
  format::ClockTriple best{};
  uint64_t best_gap = ~uint64_t{0};
  // Keep the tightest of a few tries: a preemption between the reads would
  // otherwise put microseconds of error into every converted timestamp.
  for (int i = 0; i < 5; ++i) {
    Ticks a = ticks_now();
    int64_t mono = mono_ns();
    int64_t real = real_ns();
    Ticks b = ticks_now();
    uint64_t gap = b - a;
    if (gap < best_gap) {
      best_gap = gap;
      best = {a + gap / 2, mono, real};
    }
  }
  if (!detail::g_ticks_are_tsc) best.ticks = static_cast<Ticks>(best.mono_ns);
  return best;
}

double ns_per_tick() noexcept {
  static const double value = [] {
    if (!detail::g_ticks_are_tsc) return 1.0;
    const format::ClockTriple a = sample_clock_triple();
    timespec ts{0, 2000000};
    nanosleep(&ts, nullptr);
    const format::ClockTriple b = sample_clock_triple();
    const double dt = static_cast<double>(b.ticks - a.ticks);
    return dt > 0 ? static_cast<double>(b.mono_ns - a.mono_ns) / dt : 1.0;
  }();
  return value;
}

void TickConverter::add(const format::ClockTriple& t) noexcept {
  if (n_ == 0) {
    cur_ = t;
    n_ = 1;
    return;
  }
  if (t.ticks <= cur_.ticks) return;
  const double dt = static_cast<double>(t.ticks - cur_.ticks);
  const double mono = static_cast<double>(t.mono_ns - cur_.mono_ns) / dt;
  const double real = static_cast<double>(t.real_ns - cur_.real_ns) / dt;
  // A wildly wrong triple (corrupt file, suspended VM) must not produce
  // negative or absurd times: it is ignored, the previous segment goes on.
  if (!(mono > 0.0 && mono < 1e3)) return;
  prev_ = cur_;
  cur_ = t;
  n_ = 2;
  slope_ = mono;
  real_slope_ = (real > 0.0 && real < 1e3) ? real : mono;
}

int64_t TickConverter::to_mono_ns(Ticks t) const noexcept {
  if (n_ == 0) return static_cast<int64_t>(t);
  const double d = static_cast<double>(static_cast<int64_t>(t - cur_.ticks));
  return cur_.mono_ns + static_cast<int64_t>(d * slope_);
}

int64_t TickConverter::to_real_ns(Ticks t) const noexcept {
  if (n_ == 0) return static_cast<int64_t>(t);
  const double d = static_cast<double>(static_cast<int64_t>(t - cur_.ticks));
  return cur_.real_ns + static_cast<int64_t>(d * real_slope_);
}

int64_t TickConverter::duration_ns(Ticks, Ticks dur) const noexcept {
  return static_cast<int64_t>(static_cast<double>(dur) * slope_);
}

}  // namespace stallscope
