// 256 ranks on 32 hosts, written as real trace files (synth_files.hpp) with
// per-host wall-clock offsets up to ±50 ms, drift up to ±20 ppm, jitter and
// one rank slowed by its storage: merged and analyzed, clocks aligned, the
// straggler found, and the analysis' memory within the stated bound
// (docs/report-guide.md "Memory": per rank ≤ 128 KB whatever the run's length).
#include <sys/resource.h>

#include <boost/test/unit_test.hpp>

#include "multirank/synth_files.hpp"
#include "stallscope/analyzer/analyzer.hpp"

namespace an = stallscope::analyzer;

namespace {

long max_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synth_256)

BOOST_AUTO_TEST_CASE(straggler_found_among_256_ranks_within_memory_bound) {
  stallscope::testing::TempDir dir;
  stallscope::testing::SynthFilesSpec s;
  s.ranks = 256;
  s.steps = 150;
  s.straggler = 77;
  s.compute_ms = 10;
  s.straggler_ms = 12;  // ~40 % of its step
  const stallscope::testing::SynthFiles gen(s);
  gen.write_all(dir.path());
  const long before = max_rss_kb();
  const an::Report rep = an::analyze_paths({dir.path()}, {});
  const long grown_kb = max_rss_kb() - before;
  BOOST_TEST_REQUIRE(rep.ranks.size() == 256u);
  BOOST_TEST(rep.errors.empty());
  const auto& c = rep.cross;
  BOOST_TEST(c.clock.method == "collectives");
  BOOST_TEST(c.clock.hosts == 32u);
  BOOST_TEST(c.clock.residual_skew_us < 100.0);
  BOOST_TEST(c.instances == s.steps);
  BOOST_TEST_REQUIRE(c.stragglers.size() == 1u);
  BOOST_TEST(c.stragglers[0].rank == 77);
  BOOST_TEST(c.stragglers[0].cause == "storage");
  BOOST_TEST(c.arrival_skew_p50_ms > 10.0);
  // Every other rank waits for it: its straggler wait ≈ the injected 12 ms.
  const auto& r0 = rep.ranks[0];
  const double wait =
      double(r0.parts[an::idx(an::Part::kStragglerWait)].total_ns) / 1e6 / double(r0.steady_steps);
  BOOST_TEST(wait > 9.0);
  BOOST_TEST(wait < 15.0);
  // Hours of wait summed over 255 ranks read in seconds, not millions of ms.
  BOOST_TEST(c.summary.find(" s for it in all") != std::string::npos, c.summary);
  for (const auto& r : rep.ranks)
    for (const auto& st : r.steps) BOOST_TEST_REQUIRE(an::sum(st.parts) == st.wall());
  const long bound_kb = long(s.ranks) * 128;
  BOOST_TEST_MESSAGE("analysis grew max RSS by " << grown_kb << " KB (bound " << bound_kb
                                                 << " KB)");
  BOOST_TEST(grown_kb <= bound_kb);
}

BOOST_AUTO_TEST_CASE(parallel_mode_gives_the_same_report) {
  stallscope::testing::TempDir dir;
  stallscope::testing::SynthFilesSpec s;
  s.ranks = 32;
  s.steps = 60;
  s.straggler = 5;
  stallscope::testing::SynthFiles(s).write_all(dir.path());
  an::AnalyzeOptions seq, par;
  par.rank_threads = 4;
  // Progress from the rank threads: one call at a time, rising to the total.
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  par.progress = [&calls](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  const an::Report a = an::analyze_paths({dir.path()}, seq);
  const an::Report b = an::analyze_paths({dir.path()}, par);
  BOOST_TEST_REQUIRE(a.ranks.size() == b.ranks.size());
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    BOOST_TEST(a.ranks[i].rank == b.ranks[i].rank);
    BOOST_TEST_REQUIRE(a.ranks[i].steps.size() == b.ranks[i].steps.size());
    for (size_t k = 0; k < a.ranks[i].steps.size(); ++k)
      BOOST_TEST_REQUIRE((a.ranks[i].steps[k].parts == b.ranks[i].steps[k].parts));
  }
  BOOST_TEST_REQUIRE(b.cross.stragglers.size() == 1u);
  BOOST_TEST(b.cross.stragglers[0].rank == 5);
  BOOST_TEST(a.cross.summary == b.cross.summary);
  BOOST_TEST_REQUIRE(!calls.empty());
  for (size_t i = 1; i < calls.size(); ++i) BOOST_TEST(calls[i].first >= calls[i - 1].first);
  BOOST_TEST(calls.back().first == calls.back().second);
}

BOOST_AUTO_TEST_SUITE_END()
