// Tick conversion: piecewise interpolation between clock triples, so a
// drifting TSC and a slewed realtime clock do not accumulate error.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "stallscope/clock.hpp"

using stallscope::TickConverter;
using stallscope::format::ClockTriple;

BOOST_AUTO_TEST_SUITE(tick_clock)

BOOST_AUTO_TEST_CASE(interpolates_each_segment_with_its_own_rate) {
  // 3 ticks per ns for the first second, then the oscillator drifts by
  // 100 ppm; realtime is 1e18 ahead and slewed by +50 ppm.
  TickConverter c(false, 1.0 / 3.0);
  const ClockTriple a{0, 1000000000, 1000000000000000000};
  const ClockTriple b{3000000000, 2000000000, 1000000001000050000};
  const ClockTriple d{6000300000, 3000000000, 1000000002000100000};
  c.add(a);
  c.add(b);
  BOOST_TEST(c.to_mono_ns(1500000000) == 1500000000);
  BOOST_TEST(std::llabs(c.to_real_ns(1500000000) - 1000000000500025000) <= 1);
  c.add(d);
  // Halfway through the drifting segment: exact there, where a single
  // global rate would be off by 50 us.
  const uint64_t mid = (b.ticks + d.ticks) / 2;
  BOOST_TEST(std::llabs(c.to_mono_ns(mid) - 2500000000) <= 1);
  BOOST_TEST(std::llabs(c.duration_ns(mid, 3000300) - 1000000) <= 1);
  // An instant of the first segment converts as it did before the newer
  // triple arrived: the mapping depends on the tick alone.
  BOOST_TEST(c.to_mono_ns(1500000000) == 1500000000);
}

BOOST_AUTO_TEST_CASE(one_instant_converts_the_same_from_any_later_chunk) {
  // Jittery triples (rates differ by 1e-4 between segments) must not move
  // an instant that lies in an older segment.
  TickConverter c(false, 0.5);
  int64_t mono = 0;
  uint64_t ticks = 0;
  c.add(ClockTriple{ticks, mono, mono});
  std::vector<int64_t> first_seen;
  const uint64_t probe = 150000000;  // inside the second segment
  for (int i = 0; i < 40; ++i) {
    ticks += 200000000;
    mono += 100000000 + (i % 2 ? 10000 : -10000);
    c.add(ClockTriple{ticks, mono, mono});
    if (i >= 1) first_seen.push_back(c.to_mono_ns(probe + 200000000));  // once its segment closed
  }
  for (int64_t v : first_seen) BOOST_TEST(v == first_seen.back());
}

BOOST_AUTO_TEST_CASE(uses_the_nominal_rate_before_two_triples) {
  TickConverter c(false, 0.5);
  c.add(ClockTriple{1000, 5000, 7000});
  BOOST_TEST(c.to_mono_ns(3000) == 6000);
}

BOOST_AUTO_TEST_CASE(ignores_triples_that_go_backwards_or_are_absurd) {
  TickConverter c(true);
  c.add(ClockTriple{100, 100, 100});
  c.add(ClockTriple{200, 200, 200});
  c.add(ClockTriple{150, 150, 150});       // backwards: ignored
  c.add(ClockTriple{300, -1000000, 300});  // negative rate: ignored
  BOOST_TEST(c.ns_per_tick() == 1.0);
  BOOST_TEST(c.to_mono_ns(400) == 400);
}

BOOST_AUTO_TEST_CASE(samples_consistent_triples_on_this_machine) {
  stallscope::detail::g_ticks_are_tsc = stallscope::detect_invariant_tsc();
  const ClockTriple a = stallscope::sample_clock_triple();
  const ClockTriple b = stallscope::sample_clock_triple();
  BOOST_TEST(b.ticks >= a.ticks);
  BOOST_TEST(b.mono_ns >= a.mono_ns);
  BOOST_TEST(std::llabs((b.real_ns - a.real_ns) - (b.mono_ns - a.mono_ns)) < 1000000);
}

BOOST_AUTO_TEST_SUITE_END()
