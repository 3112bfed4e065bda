// Straggler attribution on synthetic lockstep runs (synth_ranks.hpp): a rank
// slowed by its storage is named with that cause and the others' waits move
// into straggler wait; ranks equally slow name no one ("all ranks wait mostly for the last rank's storage").
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analyzer/run_self.hpp"
#include "analyzer/src/multirank/multirank_internal.hpp"
#include "multirank/synth_ranks.hpp"

namespace an = stallscope::analyzer;
using an::Part;
using stallscope::testing::SynthSpec;

namespace {

an::Report analyzed(const SynthSpec& s) {
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  return rep;
}

double steady_mean_ms(const an::RankReport& r, Part p) {
  return r.steady_steps == 0
             ? 0
             : static_cast<double>(r.parts[an::idx(p)].total_ns) / 1e6 / double(r.steady_steps);
}

void check_sums(const an::Report& rep) {
  for (const auto& r : rep.ranks)
    for (const auto& s : r.steps) BOOST_TEST_REQUIRE(an::sum(s.parts) == s.wall());
}


// What the cross-rank pass concluded, as text: the same run must give the
// same text whether its tables were spilled to the scratch file or not.
std::string fingerprint(const an::Report& rep) {
  std::ostringstream o;
  o << rep.cross.instances << ' ' << rep.cross.straggler_wait_ns << ' ' << rep.cross.common_cause << ' '
    << rep.cross.arrival_skew_p50_ms << ' ' << rep.cross.clock.note << '\n';
  for (const auto& r : rep.ranks) {
    o << r.cross.times_last << ' ' << r.cross.waited_ns << ' ' << r.cross.caused_ns << ' '
      << r.cross.median_margin_ms << ' ' << r.cross.clock_offset_ns << ' '
      << r.parts[an::idx(Part::kStragglerWait)].p50_ms << '\n';
    for (size_t i = 0; i < r.steps.size(); i += 97) o << r.steps[i].parts[an::idx(Part::kStragglerWait)] << ' ';
    o << '\n';
  }
  return o.str();
}

// 1,500 steps on 2 hosts, all ranks equally slow (the last rank changes
// from one collective to the next): each table is dozens of chunks, most in
// the scratch file, and every search for a step starts from a stale hint.
SynthSpec long_even_run() {
  SynthSpec s;
  s.steps = 1500;
  s.ranks_per_host = 2;
  s.stall_ms = {20, 20, 20, 20};
  s.stall_jitter_ms = 4;
  s.hosts = {{}, {30'000'000, 10, 5'000'000'000}};
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(straggler)

BOOST_AUTO_TEST_CASE(slow_storage_rank_is_named_with_its_cause) {
  SynthSpec s;
  s.stall_ms = {0, 0, 30, 0};  // rank 2: 30 ms of a ~56 ms step on storage
  s.stall_jitter_ms = 0.5;
  const an::Report rep = analyzed(s);
  BOOST_TEST_REQUIRE(rep.cross.present);
  BOOST_TEST(rep.cross.instances == s.steps);
  BOOST_TEST_REQUIRE(rep.cross.stragglers.size() == 1u);
  const an::Straggler& st = rep.cross.stragglers[0];
  BOOST_TEST(st.rank == 2);
  BOOST_TEST(st.cause == "storage");
  BOOST_TEST(st.times_last == s.steps);
  BOOST_TEST(st.median_margin_ms == 30.0, boost::test_tools::tolerance(0.05));
  for (size_t r : {0u, 1u, 3u}) {
    BOOST_TEST(steady_mean_ms(rep.ranks[r], Part::kStragglerWait) == 30.0,
               boost::test_tools::tolerance(0.05));
    BOOST_TEST(steady_mean_ms(rep.ranks[r], Part::kCommTransfer) == 5.0,
               boost::test_tools::tolerance(0.05));
    BOOST_TEST(rep.ranks[r].cross.waited_ns > 0);
  }
  BOOST_TEST(steady_mean_ms(rep.ranks[2], Part::kStragglerWait) < 0.2);
  BOOST_TEST(rep.ranks[2].cross.caused_ns > 0);
  BOOST_TEST(rep.cross.common_cause.empty());
  BOOST_TEST(rep.cross.summary.find("rank 2") != std::string::npos);
  check_sums(rep);
}

BOOST_AUTO_TEST_CASE(equally_slow_ranks_name_no_straggler_over_seeds) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SynthSpec s;
    s.seed = seed;
    s.stall_ms = {30, 30, 30, 30};
    s.stall_jitter_ms = 10;
    const an::Report rep = analyzed(s);
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_TEST(rep.cross.stragglers.empty());
      BOOST_TEST(rep.cross.common_cause == "all ranks wait mostly for the last rank's storage");
      BOOST_TEST(rep.cross.straggler_wait_ns > 0);
      check_sums(rep);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_lead_under_one_ms_is_not_a_straggler) {
  SynthSpec s;
  s.stall_ms = {0, 0.6, 0, 0};  // always last, by 0.6 ms
  s.arrival_jitter_ms = 0.01;
  const an::Report rep = analyzed(s);
  BOOST_TEST(rep.ranks[1].cross.times_last == s.steps);
  BOOST_TEST(rep.ranks[1].cross.p_value < 1e-6);
  BOOST_TEST(rep.cross.stragglers.empty());
  check_sums(rep);
}

BOOST_AUTO_TEST_CASE(parts_sum_to_step_time_after_the_move_with_overlap) {
  SynthSpec s;
  s.ranks = 8;
  s.stall_ms = {5, 0, 0, 6, 0, 0, 0, 40};  // rank 7 last by ~30 ms; the others within ~8 ms
  s.stall_jitter_ms = 2;
  s.transfer_ms = 0.5;  // wait windows reach past short transfers
  const an::Report rep = analyzed(s);
  check_sums(rep);
  for (const auto& r : rep.ranks)
    for (const auto& st : r.steps) {
      BOOST_TEST_REQUIRE(st.parts[an::idx(Part::kStragglerWait)] >= 0);
      BOOST_TEST_REQUIRE(st.parts[an::idx(Part::kCommTransfer)] >= 0);
    }
  BOOST_TEST_REQUIRE(rep.cross.stragglers.size() == 1u);
  BOOST_TEST(rep.cross.stragglers[0].rank == 7);
}

// Every rank's storage reads a batch in 30 ms; rank 1 is last every time by
// ~20 ms only because its pipeline runs a constant phase behind (the others
// prefetched). Its storage is not slower: no straggler, "all ranks wait mostly for the last rank's storage".
BOOST_AUTO_TEST_CASE(a_constant_phase_lag_is_not_a_slow_rank) {
  SynthSpec s;
  s.stall_ms = {2, 22, 2, 2};
  s.read_ms = {30, 30, 30, 30};
  const an::Report lag = analyzed(s);
  BOOST_TEST(lag.ranks[1].cross.times_last == s.steps);
  BOOST_TEST(lag.cross.stragglers.empty());
  BOOST_TEST(lag.cross.common_cause == "all ranks wait mostly for the last rank's storage");
  // Calibration: the same lag with rank 1's reads really slower is named.
  s.read_ms = {30, 60, 30, 30};
  const an::Report slow = analyzed(s);
  BOOST_TEST_REQUIRE(slow.cross.stragglers.size() == 1u);
  BOOST_TEST(slow.cross.stragglers[0].rank == 1);
  check_sums(lag);
}

BOOST_AUTO_TEST_CASE(one_rank_has_no_cross_section) {
  SynthSpec s;
  s.ranks = 1;
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  BOOST_TEST(!rep.cross.present);
  BOOST_TEST(rep.ranks[0].parts[an::idx(Part::kStragglerWait)].total_ns == 0);
}

BOOST_AUTO_TEST_CASE(binomial_tail_matches_closed_forms) {
  namespace mr = an::multirank;
  BOOST_TEST(mr::binomial_tail(10, 10, 0.5) == 1.0 / 1024, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(mr::binomial_tail(10, 0, 0.5) == 1.0);
  BOOST_TEST(mr::binomial_tail(3, 2, 0.25) == 3 * 0.0625 * 0.75 + 0.015625,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(mr::binomial_tail(2000, 2000, 1.0 / 256) == 0.0);
}

// The child analyzes with TMPDIR unusable (tables stay in memory) and
// writes its fingerprint where STRAGGLER_TEST_OUT says.
BOOST_AUTO_TEST_CASE(spilled_tables_give_the_same_result_as_tables_in_memory) {
  const an::Report rep = analyzed(long_even_run());
  const std::string mine = fingerprint(rep);
  if (const char* out = std::getenv("STRAGGLER_TEST_OUT")) {
    BOOST_TEST(an::spill::Arena::instance().bytes_in_use() == 0u);
    std::ofstream(out) << mine;
    return;
  }
  BOOST_TEST(an::spill::Arena::instance().bytes_in_use() > 0u);  // this one did spill
  BOOST_TEST(rep.cross.stragglers.empty());
  BOOST_TEST(rep.cross.common_cause == "all ranks wait mostly for the last rank's storage");
  BOOST_TEST(rep.cross.clock.method == "collectives");
  char tmpl[] = "/tmp/straggler-fingerprint-XXXXXX";
  const int fd = mkstemp(tmpl);
  BOOST_TEST_REQUIRE(fd >= 0);
  close(fd);
  const int st = stallscope::testing::run_self_test(
      "straggler/spilled_tables_give_the_same_result_as_tables_in_memory",
      {std::string("STRAGGLER_TEST_OUT=") + tmpl, "TMPDIR=/nonexistent/straggler-test"});
  BOOST_TEST_REQUIRE(stallscope::testing::exited_ok(st), "child status " << st);
  std::ostringstream theirs;
  theirs << std::ifstream(tmpl).rdbuf();
  unlink(tmpl);
  BOOST_TEST(theirs.str() == mine);
}

BOOST_AUTO_TEST_SUITE_END()
