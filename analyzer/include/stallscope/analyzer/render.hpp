// stallscope analyzer — reports: terminal text, versioned JSON
// (docs/report-schema.md), one self-contained HTML page, and the comparison
// of two runs (`stallscope diff`).
//
//   write_text(std::cout, report, {.color = isatty(1)});
//   write_json(file, report);
//   write_html(page, report);
#pragma once

#include <iosfwd>
#include <string>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

struct TextOptions {
  bool color = false;       // ANSI colors
  size_t max_remedies = 3;  // remedies shown per rank
  size_t max_outliers = 3;  // outlier steps shown per rank
};

// The one-screen terminal report.
void write_text(std::ostream& out, const Report& r, const TextOptions& opt);
// JSON, schema "stallscope.report" version kSchemaVersion, with the per-step table.
void write_json(std::ostream& out, const Report& r);
// One HTML file, no network: stacked bars of the parts per step, a timeline
// of representative steps, the remedies.
void write_html(std::ostream& out, const Report& r);

// Reads a report back from its JSON (for diff against a saved report).
// False with *error naming the file/field on bad input.
bool read_json(const std::string& text, Report& out, std::string* error);

struct DiffOptions {
  bool json = false;
  double tolerance = 0.25;  // a remedy "delivered" if the gain is within this share of its prediction
  // The remedy applied between the runs (a remedy id); the others are shown
  // as "not applied" instead of being credited with the gain. Empty: unknown,
  // every remedy is judged against the gain.
  std::string applied;
};
// Per-part deltas of rank 0 of each run (or of matching ranks), and for each
// remedy `a` predicted whether `b` shows the predicted gain.
void write_diff(std::ostream& out, const Report& a, const Report& b, const DiffOptions& opt);

}  // namespace stallscope::analyzer
