// Step-table summaries: warm-up detection, percentiles, outliers, per-part
// statistics over the steady steps.
#pragma once

#include <vector>

#include "decimated.hpp"
#include "stallscope/analyzer/analyzer.hpp"

namespace stallscope::analyzer {

// Steps a percentile is exact up to; beyond, it comes from an evenly spread
// sample of this many (decimated.hpp), so memory stays bounded.
inline constexpr size_t kSampleCap = size_t{1} << 16;

// Warm-up: from the first step, every step until the first whose wall time
// is within 1.5 × the median of all steps (at least one step when there are
// 4 or more, never more than max_steps or a quarter of the steps). `walls`
// is a sample of every step's wall time (kSampleCap), consumed.
size_t warmup_count(const SpillVector<StepResult>& steps, size_t max_steps,
                    Decimated<int64_t>& walls);
double percentile_ms(std::vector<int64_t> ns, double q);
// The median and the 90th percentile of `ns` (reordered in place), in ms:
// the same values as percentile_ms(ns, 0.5) and percentile_ms(ns, 0.9).
void p50_p90_ms(std::vector<int64_t>& ns, double& p50, double& p90);
// Fills warmup/steady counts, step and part percentiles, outliers, in one
// pass over the steps after the first few. `walls` is the sample of every
// step's wall time taken as the steps were made (kSampleCap), consumed.
// `min_warmup`: at least this many leading steps are warm-up (a headspace
// run's steps before its replay began).
void summarize_steps(RankReport& r, const AnalyzeOptions& opt, Decimated<int64_t>& walls,
                     size_t min_warmup = 0);

}  // namespace stallscope::analyzer
