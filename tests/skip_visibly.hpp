// Preconditions that say when they skip (STYLE.md, "Tests": a skip is never
// counted as a pass). A case whose precondition fails is skipped by Boost.Test,
// and the run still passes; skip_unless also prints one line for it,
//
//   stallscope-test: skipped SUITE/CASE: REASON
//
// which ctest keeps in Testing/Temporary/LastTest.log whether the test passed
// or not, and scripts/test.sh counts in its summary.
//
//   BOOST_AUTO_TEST_CASE(needs_a_tmpfs, *stallscope::test::skip_unless(can_mount_tmpfs)) {...}
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>

namespace stallscope::test {

using PreconditionCheck = boost::test_tools::assertion_result (*)(boost::unit_test::test_unit_id);

inline boost::unit_test::decorator::precondition skip_unless(PreconditionCheck check) {
  return boost::unit_test::precondition([check](boost::unit_test::test_unit_id id) {
    boost::test_tools::assertion_result r = check(id);
    if (!r) {
      const std::string name = boost::unit_test::framework::get(id, boost::unit_test::TUT_ANY).full_name();
      std::printf("stallscope-test: skipped %s: %s\n", name.c_str(), r.message().str().c_str());
      std::fflush(stdout);
    }
    return r;
  });
}

}  // namespace stallscope::test
