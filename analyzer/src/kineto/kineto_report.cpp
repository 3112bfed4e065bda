// An imported profiler trace through the normal analysis, then what such a
// trace cannot say: DataLoader workers are not traced (a data stall stays
// unsplit), there are no CPU samples. The remedy list gains the DataLoader
// knobs for an unsplit stall, with the way to split it.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "capacity.hpp"
#include "kineto/kineto_internal.hpp"

namespace stallscope::analyzer::kineto {

namespace {

std::string fmt(const char* f, double v) {
  char buf[256];  // the longest format here is ~130 characters
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

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

// The DataLoader knobs for a data stall the profiler could not split.
std::optional<Remedy> dataloader_remedy(const RankReport& r) {
  const double step = mean_step_ms(r);
  const double data = mean_part_ms(r, Part::kDataUnknown);
  if (step <= 0 || data < 0.05 * step) return std::nullopt;
  Remedy m;
  m.id = "tune_dataloader";
  m.title = "Feed the trainer faster: DataLoader workers, prefetch, pinned memory";
  m.evidence = fmt("the trainer waits %.2f ms per step in DataLoader.__next__ ", data) +
               fmt("(%.0f %% of the step); the profiler does not trace the workers, so whether "
                   "storage or preprocessing is slow is unknown",
                   100.0 * data / step);
  m.model = "bound: step - data_stall (the stall's cause inside the DataLoader was not recorded)";
  m.loader_knob =
      "run the job under `stallscope run` to split the data stall into storage and preprocessing";
  m.pytorch_knob =
      "DataLoader(num_workers=..., prefetch_factor=..., pin_memory=True, persistent_workers=True)";
  m.step_ms = step;
  m.predicted_step_ms = std::max(0.0, step - data);
  m.bound = true;
  m.inputs_from = "assumed";
  m.inputs = {{"data_stall_ms", data, "ms"}, {"step_ms", step, "ms"}};
  return m;
}

void add_remedy(RankReport& r, Remedy m, size_t max) {
  auto pos = std::find_if(r.remedies.begin(), r.remedies.end(), [&](const Remedy& x) {
    return x.id != "healthy" && x.gain_ms() < m.gain_ms();
  });
  r.remedies.insert(pos, std::move(m));
  if (r.remedies.size() > max) r.remedies.resize(max);
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
  if (imp.stats.steps == 0 && r.source != StepSource::kNone)
    notes.push_back("no ProfilerStep#N in the trace: steps from " +
                    std::string(step_source_key(r.source)));
  notes.insert(notes.end(), imp.warnings.begin(), imp.warnings.end());
  r.warnings.insert(r.warnings.begin(), notes.begin(), notes.end());
  if (auto m = dataloader_remedy(r))
    add_remedy(r, std::move(*m), std::max<size_t>(opt.max_remedies, 1));
  return r;
}

}  // namespace stallscope::analyzer::kineto
