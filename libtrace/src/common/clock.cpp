// Clock sampling and tick-to-nanosecond conversion (see clock.hpp).
#include "stallscope/clock.hpp"

#include <cstdint>
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
  Point p{t, nominal_, nominal_};
  if (n_ > 0) {
    const format::ClockTriple& last = point(n_ - 1).at;
    if (t.ticks <= last.ticks) return;
    const double dt = static_cast<double>(t.ticks - last.ticks);
    p.mono_rate = static_cast<double>(t.mono_ns - last.mono_ns) / dt;
    p.real_rate = static_cast<double>(t.real_ns - last.real_ns) / dt;
    if (!(p.mono_rate > 0.0 && p.mono_rate < 1e3)) return;
    if (!(p.real_rate > 0.0 && p.real_rate < 1e3)) p.real_rate = p.mono_rate;
  }
  if (n_ == kWindow) {
    ring_[first_] = p;  // overwrite the oldest
    first_ = (first_ + 1) % kWindow;
  } else {
    ring_[(first_ + n_) % kWindow] = p;
    ++n_;
  }
}

int TickConverter::segment_end(Ticks t) const noexcept {
  // Events are nearly always in the newest segment or two: scan backwards.
  int i = n_ - 1;
  while (i > 1 && t < point(i - 1).at.ticks) --i;
  return i;
}

int64_t TickConverter::convert(Ticks t, bool real) const noexcept {
  if (n_ == 0) return static_cast<int64_t>(t);
  const Point& p = point(n_ == 1 ? 0 : segment_end(t));
  const double rate = n_ == 1 ? nominal_ : real ? p.real_rate : p.mono_rate;
  return interpolate(real ? p.at.real_ns : p.at.mono_ns, p.at.ticks, rate, t);
}

bool TickConverter::segment(int k, Segment& out) const noexcept {
  if (n_ == 0 || k < 0) return false;
  if (n_ == 1) {
    if (k > 0) return false;
    const Point& p = point(0);
    out = {0, ~Ticks{0}, p.at.ticks, p.at.mono_ns, nominal_};
    return true;
  }
  // The piece segment_end() picks for ticks in [from, to).
  const int i = n_ - 1 - k;
  if (i < 1) return false;
  const Point& p = point(i);
  out = {i == 1 ? 0 : point(i - 1).at.ticks, k == 0 ? ~Ticks{0} : p.at.ticks, p.at.ticks,
         p.at.mono_ns, p.mono_rate};
  return true;
}

int64_t TickConverter::to_mono_ns(Ticks t) const noexcept { return convert(t, false); }

int64_t TickConverter::to_real_ns(Ticks t) const noexcept { return convert(t, true); }

int64_t TickConverter::duration_ns(Ticks start, Ticks dur) const noexcept {
  int64_t out = 0;
  if (__builtin_sub_overflow(to_mono_ns(start + dur), to_mono_ns(start), &out)) out = INT64_MAX;
  return out;
}

double TickConverter::ns_per_tick() const noexcept {
  return n_ >= 2 ? point(n_ - 1).mono_rate : nominal_;
}

}  // namespace stallscope
