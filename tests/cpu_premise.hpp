// Premises of the tests that measure shares of step time on real runs
// (RELIABILITY.md 38): such a verdict holds when the run's processes get the
// CPU they ask for, which a machine other processes keep busy does not give.
// A case checks its verdict first; only when it is wrong and the CPUs are
// busy does it skip, visibly (exit 77, ctest SKIP), never as a pass.
//
//   if (!verdict_right)
//     if (const std::string busy = cpus_busy(2); !busy.empty())
//       skip_case("preprocessing not named: " + busy);
//   BOOST_TEST(verdict_right);
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include <boost/test/framework.hpp>
#include <boost/test/results_collector.hpp>
#include <boost/test/tree/test_unit.hpp>

#include "cpu_busy.hpp"

namespace stallscope::test {

// Prints "SKIP: why" and ends the process with 77, which ctest shows as
// skipped; returns instead when a check of the running case has failed, so
// a skip never hides a failure. Only for a case that is a ctest entry of its
// own (stallscope_add_case_tests), as the exit ends every case after it.
inline void skip_case(const std::string& why) {
  namespace ut = boost::unit_test;
  const ut::test_results& r =
      ut::results_collector.results(ut::framework::current_test_case().p_id);
  if (r.p_assertions_failed.get() > 0) return;
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(77);
}

}  // namespace stallscope::test
