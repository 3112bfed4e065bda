// The main() of every Boost.Test suite that has no main of its own, built
// once (cmake/StallscopeTesting.cmake): the test module is named after the
// executable. A suite with its own main() (one that exits 77 when it cannot
// run here) defines BOOST_TEST_NO_MAIN and does not link this.
//
// A case skipped by a precondition is a skip, not a pass: each one is
// printed on its own line, "stallscope-test: skipped SUITE/CASE: REASON",
// which ctest keeps in Testing/Temporary/LastTest.log whether the test
// passed or not, and scripts/test.sh counts them in its summary.
#include <boost/test/tree/observer.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

namespace ut = boost::unit_test;

class SkipLog : public ut::test_observer {
 public:
  void test_unit_skipped(const ut::test_unit& tu, ut::const_string reason) override {
    // "disabled": left out by --run_test, not skipped.
    if (reason == ut::const_string("disabled")) return;
    skipped_.push_back(tu.full_name() + ": " + std::string(reason.begin(), reason.end()));
  }
  void print() const {
    for (const auto& line : skipped_) std::printf("stallscope-test: skipped %s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  std::vector<std::string> skipped_;
};

SkipLog g_skips;

bool init_suite() {
  auto& master = ut::framework::master_test_suite();
  if (master.argc > 0 && master.argv[0] != nullptr) {
    const std::string path = master.argv[0];
    master.p_name.value = path.substr(path.find_last_of('/') + 1);
  }
  ut::framework::register_observer(g_skips);
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  const int rc = ut::unit_test_main(&init_suite, argc, argv);
  g_skips.print();
  return rc;
}
