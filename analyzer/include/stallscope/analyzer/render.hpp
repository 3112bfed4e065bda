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
#include <vector>

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
// One HTML file, no network (docs/report-guide.md): the verdict and the top
// remedy first, the parts of every step (bucketed in long runs), the share of
// each part, timelines of a typical and the longest step, capacity against
// demand, the CPU budget, the remedies as cards.
void write_html(std::ostream& out, const Report& r);

// Consecutive steps shown as one bar of the steps chart (and written to the
// JSON as `step_buckets`): the median step by wall time with its parts, and
// the longest. With no more steps than buckets asked for, one step each.
struct StepBucket {
  uint64_t first = 0, last = 0;  // step indices, inclusive
  size_t steps = 0;
  uint64_t median_index = 0, max_index = 0;
  int64_t median_wall_ns = 0, max_wall_ns = 0;
  PartNs median_parts{};         // the median step's parts
  bool warmup = false;           // every step of it is a warm-up step
  bool outlier = false;          // one of its steps is an outlier
};
std::vector<StepBucket> step_buckets(const RankReport& r, size_t max_buckets);
// The bars of a rank's steps chart: 240 on a page of one rank, 60 per rank
// with up to 16 ranks, 24 per rank screen beyond (the page shows 16 of
// them beside the heatmaps and stays under 500 KB at 256 ranks × 1,000 steps).
constexpr size_t step_chart_bars(size_t ranks) noexcept { return ranks > 16 ? 24 : ranks > 1 ? 60 : 240; }
// The steps chart's full height: the longest steady step that is not an
// outlier, with 10 % room (the longest step of all when none is steady).
// Taller steps (warm-up, outliers) are clipped at it and marked.
int64_t chart_scale_ns(const RankReport& r);

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

// One comparison on the diff page: a plain `diff A B`, or one trial of a
// `stallscope tune` directory against the trial it built on.
struct DiffSection {
  std::string heading;   // "trial 2 (more workers: --set …) against trial 1: delivered"
  std::string note;      // a sentence under it ("the setting failed: …"), "" none
  const Report* a = nullptr;  // both null: nothing to compare (a failed setting)
  const Report* b = nullptr;
  DiffOptions opt;
};
// The diff as one self-contained HTML page: `table` first (its first row the
// header, e.g. the tune trials; empty: none), then per section and rank the
// steps before and after as bars of their parts, each part before against
// after, and each remedy's predicted gain against the measured one.
void write_diff_html(std::ostream& out, const std::string& title,
                     const std::vector<std::vector<std::string>>& table,
                     const std::vector<DiffSection>& sections);

}  // namespace stallscope::analyzer
