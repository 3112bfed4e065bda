// The main() of every Boost.Test suite that has no main of its own, built
// once (cmake/StallscopeTesting.cmake): the test module is named after the
// executable. A suite with its own main() (one that exits 77 when it cannot
// run here) defines BOOST_TEST_NO_MAIN and does not link this.
#include <boost/test/unit_test.hpp>

#include <string>

namespace {

bool init_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  if (master.argc > 0 && master.argv[0] != nullptr) {
    const std::string path = master.argv[0];
    master.p_name.value = path.substr(path.find_last_of('/') + 1);
  }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  return boost::unit_test::unit_test_main(&init_suite, argc, argv);
}
