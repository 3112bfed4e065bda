// stallscope analyzer — the cross-rank pass over the per-rank results of one
// run: puts every rank's clock on one time base (wall clock, refined per host
// on matched collectives), carves each rank's straggler wait out of its
// collective transfer time, names the ranks others wait for (only when their
// lateness is more than chance) and fills Report::cross. analyze_paths runs
// it whenever a run holds two or more ranks.
//
//   Report r = ...;                         // ranks with their collectives
//   stallscope::analyzer::analyze_cross_rank(r, {});
//   for (const auto& s : r.cross.stragglers) ...
//
// Step parts keep summing to the step time: only comm transfer moves into
// straggler wait (docs/report-guide.md "Across ranks").
#pragma once

#include <cstdint>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

struct CrossRankOptions {
  double alpha = 0.01;         // binomial test level, divided by the number of ranks
  double margin_factor = 3.0;  // straggler margin ≥ factor × median arrival spread of the others
  int64_t min_margin_ns = 1'000'000;  // … and at least this
  // Hosts' drift is fitted only on runs at least this long (else offset only).
  int64_t drift_min_span_ns = 10'000'000'000;
  size_t drift_min_points = 20;
  // Without matched collectives, hosts' wall clocks are trusted this far (NTP).
  double wall_clock_error_ms = 10;
};

// Fills r.cross and each rank's cross fields; moves straggler wait out of
// comm transfer in every step and re-summarizes the parts. A no-op (cross
// absent) with fewer than two ranks. Not thread-safe on one Report.
void analyze_cross_rank(Report& r, const CrossRankOptions& opt = {});

}  // namespace stallscope::analyzer
