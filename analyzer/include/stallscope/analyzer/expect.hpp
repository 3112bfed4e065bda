// stallscope analyzer — expectations on a report, a regression gate for CI
// pipelines: `stallscope report --expect 'data_stall<5%' RUN` (and the same
// on `stallscope run`) exits non-zero when one fails, naming it.
//
//   Expectation e;
//   if (!parse_expectation("data_stall<5%", e, &why)) …
//   for (const auto& r : check_expectations(report, {e})) if (!r.met) …
//
// An expectation is METRIC OP VALUE UNIT, spaces allowed around OP:
//   METRIC  a part key (`data.storage`, `host.cpu`, … docs/report-schema.md),
//           a part group (`data_stall`, `host`, `comm`, `copies`; `compute`
//           is a part), `step` (the median steady step; also `step_p50`,
//           `step_p90`) or `top_gain` (the first remedy's predicted gain);
//   OP      <, <=, >, >=;
//   UNIT    % (of the step: a part's share, a gain over the step) or ms (a
//           part's mean per steady step, a step, a gain); `step` takes ms only.
// Each rank must meet every expectation; a rank with no steady steps fails
// them all (the gate never passes on an empty report).
#pragma once

#include <string>
#include <vector>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

struct Expectation {
  std::string text;    // as given, trimmed
  std::string metric;  // normalized: "data_stall", "data.storage", "step_p50", "top_gain", …
  enum class Op { kLess, kLessEqual, kGreater, kGreaterEqual } op = Op::kLess;
  double value = 0;    // in the unit: a percentage (5 for 5 %) or ms
  bool percent = false;
};

// False with *error ("--expect 'data_stal<5%': unknown metric 'data_stal'
// (known: …)") on a malformed expectation.
bool parse_expectation(const std::string& text, Expectation& out, std::string* error);

struct ExpectationResult {
  const Expectation* expectation = nullptr;
  int64_t rank = -1;
  double measured = 0;  // in the expectation's unit; NaN when not measurable
  bool met = false;
  std::string what;     // "rank 0: data_stall 12.3 % (expected < 5 %)", or why not measurable
};

// One result per rank and expectation, in rank order.
std::vector<ExpectationResult> check_expectations(const Report& r,
                                                  const std::vector<Expectation>& expected);

}  // namespace stallscope::analyzer
