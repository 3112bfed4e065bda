// Test helper: finds a rank report's remedies, stages and their numbers by
// name; a missing number fails the test.
#pragma once

#include <string>

#include <boost/test/unit_test.hpp>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::testing {

inline const analyzer::Remedy* remedy(const analyzer::RankReport& r, const std::string& id) {
  for (const auto& m : r.remedies)
    if (m.id == id) return &m;
  return nullptr;
}

inline double input(const analyzer::Remedy& m, const std::string& name) {
  for (const auto& n : m.inputs)
    if (n.name == name) return n.value;
  BOOST_FAIL("remedy " + m.id + " has no input " + name);
  return 0;
}

inline const analyzer::Stage* stage(const analyzer::RankReport& r, const std::string& name) {
  for (const auto& s : r.stages)
    if (s.name == name) return &s;
  return nullptr;
}

inline double number(const analyzer::Stage& s, const std::string& name) {
  for (const auto& n : s.numbers)
    if (n.name == name) return n.value;
  BOOST_FAIL("stage " + s.name + " has no number " + name);
  return 0;
}

}  // namespace stallscope::testing
