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

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (!exists("/usr/bin/mpirun")) {
    std::puts("SKIP: /usr/bin/mpirun (openmpi-bin) is not installed");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
