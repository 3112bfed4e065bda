// Reads process facts and probe results out of a trace file's metadata and
// attachments (keys documented in docs/report-guide.md "Probes").
#pragma once

#include <string>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::analyzer {

ProcessDesc process_of(const reader::TraceReader& r);
// Merges the probes and loader settings one file recorded into `p`.
void merge_probes(const reader::TraceReader& r, Probes& p);

}  // namespace stallscope::analyzer
