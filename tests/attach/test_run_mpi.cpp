// `mpirun -np 2 stallscope run -- PROGRAM`: both ranks record into one run
// directory (named from the job's PMIx namespace) and only rank 0 reports,
// covering both ranks. Skips (77) without Open MPI's mpirun.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <cstdio>
#include <filesystem>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"

using namespace attach;

BOOST_AUTO_TEST_SUITE(run_mpi)

BOOST_AUTO_TEST_CASE(under_mpirun_rank_0_reports_every_rank) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const int code = run({"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                        STALLSCOPE_BIN, "run", "--start-step", "2", "--steps", "5", "--",
                        ATTACH_CHILD, "steps", "40", "20", t.path() + "/done"},
                       log, 60, {"STALLSCOPE_DIR=" + t.path() + "/runs"});
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  std::vector<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(t.path() + "/runs"))
    dirs.push_back(e.path().string());
  BOOST_TEST_REQUIRE(dirs.size() == 1u, slurp(log));  // one directory for the job
  const auto rep = report_json(dirs[0]);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
  BOOST_TEST(rep["ranks"].size() == 2u);
  const std::string text = slurp(log);
  size_t reports = 0;
  for (size_t at = text.find("writing the report"); at != std::string::npos;
       at = text.find("writing the report", at + 1))
    ++reports;
  BOOST_TEST(reports == 1u, text);  // rank 0 only
}

// Each rank's `stallscope run --exit-after-window` ends its own rank once the
// window is on disk; rank 1's waits for rank 0's report first.
BOOST_AUTO_TEST_CASE(exit_after_window_under_mpirun_ends_every_rank) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const int code =
      run({"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", STALLSCOPE_BIN,
           "run", "--start-step", "2", "--steps", "5", "--exit-after-window", "--", ATTACH_CHILD,
           "steps", "100000", "20", t.path() + "/done"},
          log, 200, {"STALLSCOPE_DIR=" + t.path() + "/runs"});
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  std::vector<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(t.path() + "/runs"))
    dirs.push_back(e.path().string());
  BOOST_TEST_REQUIRE(dirs.size() == 1u, slurp(log));
  const auto rep = report_json(dirs[0]);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
  BOOST_TEST(rep["ranks"].size() == 2u);
  const std::string text = slurp(log);
  size_t ended = 0;
  for (size_t at = text.find("ended the job"); at != std::string::npos;
       at = text.find("ended the job", at + 1))
    ++ended;
  BOOST_TEST(ended == 2u, text);
  BOOST_TEST(!exists(t.path() + "/done"), text);  // no rank ran its 100000 steps
}

// `stallscope run --exit-after-window -- mpirun …`: the launcher and every
// rank it started are ended; none is left (their pids from RUN/progress).
BOOST_AUTO_TEST_CASE(exit_after_window_over_mpirun_ends_the_launcher_and_its_ranks) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const int code = run({STALLSCOPE_BIN,
                        "run",
                        "--out",
                        run_dir,
                        "--start-step",
                        "2",
                        "--steps",
                        "5",
                        "--exit-after-window",
                        "--",
                        "/usr/bin/mpirun",
                        "--allow-run-as-root",
                        "--oversubscribe",
                        "-np",
                        "2",
                        ATTACH_CHILD,
                        "steps",
                        "100000",
                        "20",
                        t.path() + "/done"},
                       log, 200);
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  BOOST_TEST(slurp(log).find("ended the job (SIGKILL to ") != std::string::npos, slurp(log));
  size_t ranks = 0;
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/progress")) {
    const std::string text = slurp(e.path().string());
    const size_t at = text.find("pid=");
    BOOST_TEST_REQUIRE(at != std::string::npos, text);
    const std::string pid = std::to_string(std::atoi(text.c_str() + at + 4));
    BOOST_TEST(!exists("/proc/" + pid), e.path().string() + " names a process still there");
    ranks += e.path().filename().string().find("-r") != std::string::npos;
  }
  BOOST_TEST(ranks >= 2u, slurp(log));
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (!exists("/usr/bin/mpirun")) {
    std::puts("SKIP: /usr/bin/mpirun (openmpi-bin) is not installed");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
