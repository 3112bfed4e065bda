// Clock alignment on synthetic runs: a host whose wall clock is 50 ms off and
// whose clock drifts 20 ppm is put back within 100 µs on matched collective
// completions; without matches the report says it trusts the wall clock.
#include <cstdlib>

#include <boost/test/unit_test.hpp>

#include "analyzer/src/multirank/multirank_internal.hpp"
#include "multirank/synth_ranks.hpp"

namespace an = stallscope::analyzer;
namespace mr = stallscope::analyzer::multirank;
using stallscope::testing::SynthSpec;

namespace {

// 4 ranks on 2 hosts; host 1 off by 50 ms and 20 ppm; a ~110 s run.
SynthSpec two_hosts() {
  SynthSpec s;
  s.ranks = 4;
  s.ranks_per_host = 2;
  s.steps = 400;
  s.step_gap_ms = 250;
  s.hosts = {{0, 0, 3'000'000'000}, {50'000'000, 20, 7'000'000'000}};
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(clock_align)

BOOST_AUTO_TEST_CASE(offset_and_drift_recovered_within_100us) {
  const SynthSpec s = two_hosts();
  const auto run = stallscope::testing::synth_run(s);
  const an::Report rep = stallscope::testing::synth_report(run);
  std::vector<mr::RankClock> clocks;
  const an::ClockAlignment a = mr::align_clocks(rep.ranks, {}, &clocks);
  BOOST_TEST(a.method == "collectives");
  BOOST_TEST(a.hosts == 2u);
  BOOST_TEST(a.matched == s.steps);
  BOOST_TEST(a.residual_skew_us < 30.0);
  BOOST_TEST_REQUIRE(a.per_host.size() == 2u);
  BOOST_TEST(a.per_host[1].drift_ppm == -20.0, boost::test_tools::tolerance(0.05));
  // Every instant of the run: host 1's rank on the time base of host 0's.
  double worst_us = 0;
  for (int64_t t : run.true_start_ns) {
    const int64_t ref = clocks[0].to_common(run.mono(0, t));
    const int64_t other = clocks[3].to_common(run.mono(3, t));
    worst_us = std::max(worst_us, std::abs(static_cast<double>(other - ref)) / 1e3);
  }
  BOOST_TEST(worst_us < 100.0);
  // Unaligned, the same comparison is off by the full 50 ms and more.
  const int64_t t = run.true_start_ns.back();
  const double raw_ms = std::abs(static_cast<double>((run.mono(3, t) + run.realtime_offset(3)) -
                                                     (run.mono(0, t) + run.realtime_offset(0)))) /
                        1e6;
  BOOST_TEST(raw_ms > 50.0);
}

BOOST_AUTO_TEST_CASE(misaligned_hosts_would_fake_a_straggler_aligned_ones_do_not) {
  SynthSpec s = two_hosts();
  s.steps = 60;
  s.step_gap_ms = 0;
  const auto run = stallscope::testing::synth_run(s);
  an::Report rep = stallscope::testing::synth_report(run);
  an::analyze_cross_rank(rep, {});
  BOOST_TEST(rep.cross.clock.method == "collectives");
  BOOST_TEST(rep.cross.stragglers.empty());
  BOOST_TEST(rep.cross.arrival_skew_p90_ms < 1.0);
  // Without the correction host 1 would look 50 ms late at every collective.
  const int64_t t0 = run.true_start_ns.front();
  const int64_t want = run.mono(0, t0) - run.mono(2, t0);
  BOOST_TEST(std::abs(rep.ranks[2].cross.clock_offset_ns - rep.ranks[0].cross.clock_offset_ns -
                      want) < 100'000);
}

BOOST_AUTO_TEST_CASE(no_matched_collective_means_wall_clock_only) {
  SynthSpec s = two_hosts();
  s.steps = 20;
  s.step_gap_ms = 0;
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  for (const size_t r : {2, 3}) {  // host 1 on another communicator
    auto& cs = rep.ranks[r].collectives;
    for (size_t i = 0; i < cs.size(); ++i) {
      auto c = cs[i];
      c.comm_id = 99;
      cs.set(i, c);
    }
  }
  an::analyze_cross_rank(rep, {});
  BOOST_TEST(rep.cross.clock.method == "wall_clock_only");
  BOOST_TEST(rep.cross.clock.note.find("may be off by") != std::string::npos);
  BOOST_TEST(!rep.warnings.empty());
}

BOOST_AUTO_TEST_CASE(one_host_shares_one_clock) {
  SynthSpec s;
  s.ranks_per_host = 4;
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  BOOST_TEST(rep.cross.clock.method == "single_host");
}

BOOST_AUTO_TEST_CASE(fit_ignores_outliers) {
  std::vector<std::pair<int64_t, int64_t>> pts;
  for (int i = 0; i < 100; ++i)
    pts.emplace_back(i * 1'000'000'000LL, 5'000'000 + (i % 10 == 0 ? 40'000'000 : 0));
  const mr::LineFit f = mr::fit_offset(pts, {});
  BOOST_TEST(f.a == 5e6, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(std::abs(f.b) < 1e-9);
}

BOOST_AUTO_TEST_SUITE_END()

// The bounded sample behind the medians of long runs: exact up to its
// capacity, then every 2nd, 4th, … value, evenly spread over the stream.
BOOST_AUTO_TEST_CASE(decimated_sample_is_exact_when_short_and_even_when_long) {
  mr::Decimated<int64_t> shortrun(100);
  for (int64_t i = 0; i < 99; ++i) shortrun.add(i);
  BOOST_TEST(shortrun.values().size() == 99u);
  BOOST_TEST(shortrun.values()[42] == 42);
  mr::Decimated<int64_t> longrun(100);
  for (int64_t i = 0; i < 100'000; ++i) longrun.add(i);
  const auto& v = longrun.values();
  BOOST_TEST(longrun.seen() == 100'000u);
  BOOST_TEST(v.size() <= 100u);
  BOOST_TEST(v.size() >= 50u);
  const int64_t stride = v[1] - v[0];
  for (size_t i = 1; i < v.size(); ++i) BOOST_TEST_REQUIRE(v[i] - v[i - 1] == stride);
  BOOST_TEST(v.front() == 0);
  BOOST_TEST(v.back() + stride >= 100'000 - stride);  // reaches the end of the stream
}

// A drifting host's offset fitted on a long run whose points were decimated
// (the run matched 200,000 collectives; 8,192 points at most are kept).
BOOST_AUTO_TEST_CASE(fit_on_a_decimated_long_run_keeps_offset_and_drift) {
  mr::Decimated<std::pair<int64_t, int64_t>> pts(8192);
  for (int64_t i = 0; i < 200'000; ++i) {
    const int64_t t = i * 5'000'000;  // every 5 ms for 1,000 s
    const int64_t jitter = (i * 7919) % 41 - 20;  // ±20 µs, deterministic
    pts.add({t, 50'000'000 + t / 50'000 + jitter * 1000});  // 50 ms + 20 ppm
  }
  BOOST_TEST(pts.values().size() <= 8192u);
  const mr::LineFit f = mr::fit_offset(pts.values(), {});
  BOOST_TEST(f.b * 1e6 == 20.0, boost::test_tools::tolerance(0.02));
  const double at0 = f.a - f.b * double(f.t0);
  BOOST_TEST(std::abs(at0 - 50e6) < 100e3);  // within 100 µs
}
