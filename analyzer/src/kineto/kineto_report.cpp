// An imported profiler trace through the normal analysis (its DataLoader
// remedy is the table's tune_dataloader, keyed on the unsplit stall), and
// notes on what such a trace cannot say: DataLoader workers are not traced
// (a data stall stays unsplit), there are no CPU samples.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "capacity.hpp"
#include "kineto/kineto_internal.hpp"

namespace stallscope::analyzer::kineto {

namespace {

std::string source_note(const ImportedRank& imp) {
  const ImportStats& s = imp.stats;
  std::string n =
      "PyTorch profiler trace (" + std::string(schema_name(imp.schema)) +
      "): " + std::to_string(s.events) + " events; " + std::to_string(s.steps) +
      " ProfilerStep#N steps; " + std::to_string(s.data_waits) +
      " data waits from enumerate(DataLoader)#...__next__ (detection: profiler annotation); " +
      std::to_string(s.kernels) + " kernels, " + std::to_string(s.collectives) + " NCCL kernels, " +
      std::to_string(s.copies) + " copies/memsets, " + std::to_string(s.api_calls) +
      " CUDA API calls, " + std::to_string(s.syncs) + " syncs";
  if (imp.rank >= 0)
    n += "; rank " + std::to_string(imp.rank) + " of " + std::to_string(imp.world_size);
  return n;
}

// Every wait was in _SingleProcessDataLoaderIter.__next__: the DataLoader
// had no workers and loaded on the trainer thread. Prefetch and persistent
// workers do not exist without workers: the setting to try is workers.
void single_process_loader(const ImportedRank& imp, RankReport& r, std::vector<std::string>& notes) {
  if (imp.stats.single_process_waits == 0 || imp.stats.single_process_waits != imp.stats.data_waits)
    return;
  notes.push_back("the DataLoader ran without workers (_SingleProcessDataLoaderIter): its loading "
                  "ran on the trainer thread, inside each data wait");
  for (Remedy& m : r.remedies) {
    if (m.kind != RemedyId::kTuneDataloader) continue;
    m.title = "Load batches in DataLoader workers";
    m.pytorch_knob = "DataLoader(num_workers=1 or more) (it had num_workers=0: loading ran on the "
                     "trainer thread; prefetch_factor and persistent_workers need workers)";
    m.settings = {{"dataloader", "num_workers", "1"}};
  }
}

}  // namespace

RankReport analyze_imported(const ImportedRank& imp, const AnalyzeOptions& opt) {
  RankReport r = analyze_rank(imp.trace, opt);
  r.rank = imp.rank;
  r.files = {imp.file};
  // Trace ns + baseTimeNanoseconds = wall clock: what the cross-rank pass aligns on.
  r.realtime_offset_ns = imp.base_time_ns;
  r.realtime_known = imp.base_time_ns != 0;
  std::vector<std::string> notes = {source_note(imp)};
  if (mean_part_ms(r, Part::kDataUnknown) > 0)
    notes.push_back(
        "a profiler trace does not show the DataLoader's workers: the data stall cannot be "
        "split into storage and preprocessing (run under `stallscope run` to split it)");
  single_process_loader(imp, r, notes);
  if (imp.step_source != StepSource::kNone && r.source == StepSource::kInferred) {
    // The importer's steps: the report names what delimited them.
    r.source = imp.step_source;
    r.source_detail = imp.step_detail;
  }
  if (r.source == StepSource::kWholeTrace)
    notes.push_back("no ProfilerStep#N and nothing that repeats like a step: the whole trace is "
                    "analyzed as one window (step times are not per step)");
  else if (imp.stats.steps == 0 && r.source != StepSource::kNone)
    notes.push_back("no ProfilerStep#N in the trace: steps " +
                    std::string(r.source == StepSource::kInferred ? "inferred from the " : "from ") +
                    r.source_detail);
  notes.insert(notes.end(), imp.warnings.begin(), imp.warnings.end());
  r.warnings.insert(r.warnings.begin(), notes.begin(), notes.end());
  return r;
}

}  // namespace stallscope::analyzer::kineto
