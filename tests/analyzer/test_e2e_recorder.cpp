// Black-box, end to end: a child process (analyzer_probe) records a known
// workload through the real recorder into STALLSCOPE_OUT; the analyzer
// reads that run directory and must give each workload's verdict.
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "analyzer/report_lookup.hpp"
#include "libtrace/probe_runner.hpp"
#include "stallscope/analyzer/analyzer.hpp"

namespace an = stallscope::analyzer;
namespace tt = boost::test_tools;
using an::Part;
using stallscope::test::TempDir;
using stallscope::testing::input;

namespace {

// Runs analyzer_probe MODE with STALLSCOPE_OUT=dir; its exit status.
int record(const std::string& mode, const std::string& dir) {
  const std::string probe = std::string(STALLSCOPE_TEST_BINARY_DIR) + "/tests/analyzer/analyzer_probe";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("STALLSCOPE_OUT", dir.c_str(), 1);
    ::execl(probe.c_str(), probe.c_str(), mode.c_str(), "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

an::RankReport analyze_mode(const std::string& mode) {
  TempDir dir;
  BOOST_REQUIRE_EQUAL(record(mode, dir.path()), 0);
  const auto rep = an::analyze_paths({dir.path()}, {});
  BOOST_REQUIRE(rep.errors.empty());
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  return rep.ranks[0];
}

double share(const an::RankReport& r, Part p) { return r.parts[an::idx(p)].share; }

bool has_remedy(const an::RankReport& r, const std::string& id) {
  return std::any_of(r.remedies.begin(), r.remedies.end(), [&](const an::Remedy& m) { return m.id == id; });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_recorder)

BOOST_AUTO_TEST_CASE(data_stall_bound_run_is_input_bound_on_storage) {
  const auto r = analyze_mode("data");
  BOOST_TEST((r.source == an::StepSource::kStepEvents));
  BOOST_TEST(r.steps.size() == 30u);
  // 6 ms of each 10 ms step waits for data: 5 ms read, 1 ms decode.
  BOOST_TEST(share(r, Part::kDataStorage) > 0.4);
  BOOST_TEST(share(r, Part::kDataStorage) > share(r, Part::kDataPreprocess));
  BOOST_TEST(share(r, Part::kCompute) < 0.5);
  BOOST_TEST(r.summary.find("input-bound") != std::string::npos, r.summary);
  BOOST_TEST(!has_remedy(r, "healthy"));
}

BOOST_AUTO_TEST_CASE(compute_bound_run_is_healthy) {
  const auto r = analyze_mode("compute");
  BOOST_TEST(share(r, Part::kCompute) >= 0.9);
  BOOST_REQUIRE(!r.remedies.empty());
  BOOST_TEST(r.remedies.front().id == "healthy");
}

BOOST_AUTO_TEST_CASE(per_step_sync_run_is_host_after_sync_bound) {
  const auto r = analyze_mode("host-after-sync");
  // 6 ms of each step: device idle after the sync returned.
  BOOST_TEST(share(r, Part::kHostAfterSync) > 0.45);
  for (size_t p = 0; p < an::kPartCount; ++p)
    BOOST_TEST(r.parts[p].share <= share(r, Part::kHostAfterSync));
  BOOST_TEST(has_remedy(r, "avoid_sync"));
  BOOST_TEST(!has_remedy(r, "healthy"));
}

// 16 files of 64 KiB read per step (480 over the run) while the trainer
// waits: 4 ms of the 10 ms step in storage.
BOOST_AUTO_TEST_CASE(small_files_run_proposes_pack_shards) {
  const auto r = analyze_mode("small-files");
  BOOST_TEST(share(r, Part::kDataStorage) == 0.4, tt::tolerance(1e-3));
  const an::Remedy* m = stallscope::testing::remedy(r, "pack_shards");
  BOOST_REQUIRE_MESSAGE(m != nullptr, r.summary);
  BOOST_TEST(input(*m, "files") == 480.0);
  BOOST_TEST(input(*m, "small_read_share") == 1.0);
  BOOST_TEST(input(*m, "storage_stall_ms") == 4.0, tt::tolerance(1e-3));
  BOOST_TEST(m->step_ms == 10.0, tt::tolerance(1e-3));
  BOOST_TEST(m->predicted_step_ms == m->step_ms - 4.0, tt::tolerance(1e-3));
  BOOST_TEST(m->bound);
}

// A 2 ms wait per step for a read (1.1 ms) and a decode (0.9 ms) started
// only when the trainer asks: both stages could serve a batch every 1.1 ms
// while the trainer takes one every 8 ms.
BOOST_AUTO_TEST_CASE(bursty_run_proposes_raise_prefetch) {
  const auto r = analyze_mode("bursty");
  const an::Remedy* m = stallscope::testing::remedy(r, "raise_prefetch");
  BOOST_REQUIRE_MESSAGE(m != nullptr, r.summary);
  BOOST_TEST(input(*m, "data_stall_ms") == 2.0, tt::tolerance(1e-3));
  BOOST_TEST(input(*m, "slowest_stage_capacity") == 1000.0 / 1.1, tt::tolerance(1e-3));
  BOOST_TEST(m->predicted_step_ms == std::max(10.0 - 2.0, 1.1), tt::tolerance(1e-3));
  BOOST_TEST(!m->bound);
}

BOOST_AUTO_TEST_SUITE_END()
