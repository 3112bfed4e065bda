// The capacity model (DESIGN.md "Root cause and remedies"): each input stage's
// utilization and capacity against the trainer's demand, the CPU budget of
// the rank, the bottleneck and the cause named in the summary line.
#pragma once

#include "run_stats.hpp"
#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

// Mean ms per steady step of a part.
double mean_part_ms(const RankReport& r, Part p);
double mean_step_ms(const RankReport& r);
const Stage* find_stage(const RankReport& r, StageKind kind);
// The DataLoader that fed the optimizer (the most wait inside steps);
// nullptr when the run recorded none.
const DataLoaderReport* fed_loader(const RankReport& r);

// Fills r.stages, r.cpu, r.bottleneck, r.cause and r.summary.
void build_capacity(RankReport& r, const RunStats& s, const RankTrace& t);

}  // namespace stallscope::analyzer
