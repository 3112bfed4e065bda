// stallscope clocks — the one place where timestamps are taken and converted.
//
// Recording stores raw "ticks": invariant-TSC cycles where the CPU has an
// invariant TSC (constant_tsc + nonstop_tsc), CLOCK_MONOTONIC nanoseconds
// elsewhere. Every trace chunk carries a (ticks, CLOCK_MONOTONIC,
// CLOCK_REALTIME) triple; readers turn ticks into nanoseconds by piecewise
// linear interpolation between triples (TickConverter), so TSC frequency
// error and NTP slewing never accumulate over a long run.
//
//   stallscope::Ticks t0 = stallscope::ticks_now();   // ~10 ns with TSC
//   ... work ...
//   int64_t ns = converter.to_mono_ns(stallscope::ticks_now());
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define STALLSCOPE_HAVE_RDTSC 1
#else
#define STALLSCOPE_HAVE_RDTSC 0
#endif

#include "stallscope/format.hpp"
#include "stallscope/trace.h"

namespace stallscope {

using Ticks = uint64_t;

namespace detail {
// True when ticks are TSC cycles; fixed once, before any event is recorded
// (set by the library constructor). Exported for the inline fast path.
STALLSCOPE_API extern bool g_ticks_are_tsc;
}  // namespace detail

inline int64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline int64_t real_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The raw timestamp of the recorder. Thread-safe, never blocks.
inline Ticks ticks_now() noexcept {
#if STALLSCOPE_HAVE_RDTSC
  if (__builtin_expect(detail::g_ticks_are_tsc, 1)) return __rdtsc();
#endif
  return static_cast<Ticks>(mono_ns());
}

// True when this machine's TSC is invariant (reads /proc/cpuinfo; slow,
// call once).
STALLSCOPE_API bool detect_invariant_tsc() noexcept;

// A triple taken as close together as possible: ticks is read on both sides
// of the clock_gettime pair and averaged; retried when preempted.
STALLSCOPE_API format::ClockTriple sample_clock_triple() noexcept;

// Nanoseconds per tick on this machine (1.0 without TSC), calibrated once
// against CLOCK_MONOTONIC (the first call may sleep 2 ms); for converting
// durations at record time. Traces are converted by the reader instead.
STALLSCOPE_API double ns_per_tick() noexcept;

// Converts ticks to CLOCK_MONOTONIC / CLOCK_REALTIME nanoseconds from a
// stream of triples: piecewise linear between consecutive triples, each
// segment with its own rate, extrapolated with the nearest segment's rate
// outside the known range. The mapping is a function of the tick alone over
// the last kWindow triples, so one instant recorded in two chunks converts
// to the same nanosecond. Feed triples in time order.
class STALLSCOPE_API TickConverter {
 public:
  static constexpr int kWindow = 64;  // triples kept (~6 s at 100 ms chunks)

  // `nominal_ns_per_tick` is used until two triples are known (1e9 / the
  // header's tsc_hz for TSC files, 1.0 for ns ticks).
  explicit TickConverter(bool ticks_are_ns = false, double nominal_ns_per_tick = 1.0)
      : nominal_(ticks_are_ns ? 1.0 : nominal_ns_per_tick) {}

  // Adds a triple. Triples whose ticks do not advance, or that imply an
  // absurd rate (corrupt file, suspended VM), are ignored.
  void add(const format::ClockTriple& t) noexcept;
  int64_t to_mono_ns(Ticks t) const noexcept;
  int64_t to_real_ns(Ticks t) const noexcept;
  // ns between `start` and `start + dur`, consistent with to_mono_ns.
  int64_t duration_ns(Ticks start, Ticks dur) const noexcept;
  bool ready() const noexcept { return n_ > 0; }
  // Nanoseconds per tick of the newest segment (the nominal rate before two triples).
  double ns_per_tick() const noexcept;

  // One linear piece of the monotonic mapping, for readers that convert
  // many ticks of the same stretch: to_mono_ns(t) == convert(t) for every t
  // in [from, to) (bit for bit: both use interpolate()).
  struct Segment {
    Ticks from = 0, to = 0;  // the ticks it serves; `to` excluded
    Ticks ticks = 0;         // the triple it interpolates from
    int64_t mono_ns = 0;
    double rate = 1.0;       // ns per tick
    int64_t convert(Ticks t) const noexcept { return interpolate(mono_ns, ticks, rate, t); }
  };
  // The segment `k` pieces back from the newest (k = 0: newest, unbounded
  // above); false when there is none.
  bool segment(int k, Segment& out) const noexcept;
  // base_ns + (t − base) × rate, rounded half away from zero and saturated:
  // a corrupt or hostile file can put ticks anywhere. A rate of exactly 1
  // (ns ticks) is the plain difference, which the rounding gives too.
  static int64_t interpolate(int64_t base_ns, Ticks base, double rate, Ticks t) noexcept {
    const auto d = static_cast<int64_t>(t - base);
    constexpr int64_t kExact = int64_t{1} << 52;  // |d| below it: d is exact as a double
    int64_t offset = d;
    if (rate != 1.0 || d >= kExact || d <= -kExact) {
      const double x = static_cast<double>(d) * rate;
      constexpr double kLimit = 4e18;
      offset = x >= kLimit    ? static_cast<int64_t>(kLimit)
               : x <= -kLimit ? -static_cast<int64_t>(kLimit)
                              : static_cast<int64_t>(x + (x >= 0 ? 0.5 : -0.5));
    }
    int64_t out = 0;
    if (__builtin_add_overflow(base_ns, offset, &out)) out = offset > 0 ? INT64_MAX : INT64_MIN;
    return out;
  }

 private:
  struct Point {
    format::ClockTriple at;
    double mono_rate;  // ns per tick of the segment ending here (nominal for the first)
    double real_rate;
  };
  const Point& point(int i) const noexcept { return ring_[(first_ + i) % kWindow]; }
  // The point whose segment converts `t`: the first point at or after t
  // (the newest when t is past it; the second oldest when before the oldest).
  int segment_end(Ticks t) const noexcept;
  int64_t convert(Ticks t, bool real) const noexcept;

  double nominal_;
  Point ring_[kWindow] = {};
  int first_ = 0;  // index of the oldest point in ring_
  int n_ = 0;      // points held
};

}  // namespace stallscope
