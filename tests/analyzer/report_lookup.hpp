// Test helper: finds a rank report's remedies, stages and their numbers by
// name; a missing number fails the test.
#pragma once

#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::testing {

inline const analyzer::Remedy* remedy(const analyzer::RankReport& r, const std::string& id) {
  for (const auto& m : r.remedies)
    if (m.id == id) return &m;
  return nullptr;
}

// The value of the number called `name` in `v`; a missing one fails the
// test, naming `owner`.
inline double named(const std::vector<analyzer::Number>& v, const std::string& name,
                    const std::string& owner) {
  for (const auto& n : v)
    if (n.name == name) return n.value;
  BOOST_FAIL(owner + " has no number " + name);
  return 0;
}

// The command the report shows to try `m` on `r`'s run ("" when none).
inline std::string try_of(const analyzer::RankReport& r, const analyzer::Remedy& m) {
  return analyzer::try_command(m.settings, r.command);
}

inline double input(const analyzer::Remedy& m, const std::string& name) {
  return named(m.inputs, name, "remedy " + m.id);
}

inline const analyzer::Stage* stage(const analyzer::RankReport& r, const std::string& name) {
  for (const auto& s : r.stages)
    if (s.name() == name) return &s;
  return nullptr;
}

// The figure called `name` (its report key) of stage `s`; a missing one
// fails the test.
inline double number(const analyzer::Stage& s, const std::string& name) {
  for (const auto& f : s.figures)
    if (analyzer::figure_key(f.id) == name) return f.value;
  BOOST_FAIL("stage " + std::string(s.name()) + " has no figure " + name);
  return 0;
}
inline bool has_number(const analyzer::Stage& s, const std::string& name) {
  for (const auto& f : s.figures)
    if (analyzer::figure_key(f.id) == name) return true;
  return false;
}

}  // namespace stallscope::testing
