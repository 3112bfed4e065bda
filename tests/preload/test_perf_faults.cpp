// White-box: the CPU list the page-fault sampler opens one event per CPU of.
#include <vector>

#include <boost/test/unit_test.hpp>

#include "perf_faults.hpp"

using namespace stallscope::preload;

BOOST_AUTO_TEST_SUITE(perf_faults)

BOOST_AUTO_TEST_CASE(parses_cpu_lists_and_refuses_malformed_ones) {
  BOOST_CHECK((parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  BOOST_CHECK((parse_cpu_list("5") == std::vector<int>{5}));
  BOOST_CHECK(parse_cpu_list("").empty());
  BOOST_CHECK(parse_cpu_list("3-1").empty());
  BOOST_CHECK(parse_cpu_list("0-").empty());
  BOOST_CHECK(parse_cpu_list("a").empty());
  BOOST_CHECK(parse_cpu_list("0-999999").empty());
}

BOOST_AUTO_TEST_CASE(online_cpus_are_never_empty) {
  const std::vector<int> cpus = online_cpus();
  BOOST_CHECK(!cpus.empty());
  BOOST_CHECK_EQUAL(cpus.front(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
