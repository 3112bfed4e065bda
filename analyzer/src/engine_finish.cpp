// End of a rank's input: the last steps, the summary over steady steps, the
// capacity model, the remedies and the warnings.
#include <algorithm>

#include "engine.hpp"
#include "remedy.hpp"
#include "summary.hpp"

namespace stallscope::analyzer {

namespace {

std::string compute_basis(bool device, uint64_t api, bool gpu_track) {
  if (device) return "device";
  return api > 0 || gpu_track ? "gpu_not_recorded" : "cpu_only";
}

}  // namespace

RankReport RankEngine::finish() {
  const bool was = finder_.decided();
  finder_.finish(stats_.last_ns, std::min(stats_.first_ns, all_first_ns_),
                 std::max(stats_.last_ns, all_last_ns_));
  if (!was && finder_.decided()) on_decided();
  advance(INT64_MAX);
  RankReport r;
  r.rank = trace_.rank;
  r.events = events_;
  r.source = finder_.source();
  r.source_detail = finder_.detail();
  // Step events that were all inferred (a profiler trace without step
  // marks) are no marks: the report says so.
  if (r.source == StepSource::kStepEvents && steps_inferred_ > 0 && steps_marked_ == 0) {
    r.source = StepSource::kInferred;
    r.source_detail = "step events inferred by the importer";
  }
  if (trace_.imported.step_source != StepSource::kNone && r.source == StepSource::kInferred) {
    // The importer's steps: the report names what delimited them.
    r.source = trace_.imported.step_source;
    r.source_detail = trace_.imported.step_detail;
  }
  r.trainer_tid = finder_.has_trainer() ? trace_.tracks[finder_.trainer_track()].tid : 0;
  r.device_activity = device_seen_;
  for (const auto& t : trace_.tracks) gpu_track_ = gpu_track_ || t.type == TrackType::kGpuStream;
  r.compute_basis = compute_basis(device_seen_, cuda_api_, gpu_track_);
  if (!steps_in_order_) {  // rare (steps of overlapping ranges): sorted in memory once
    std::vector<StepResult> v = steps_.to_vector();
    std::stable_sort(v.begin(), v.end(), [](const StepResult& a, const StepResult& b) {
      return a.start_ns < b.start_ns;
    });
    steps_ = SpillVector<StepResult>(v);
  }
  r.steps = std::move(steps_);
  r.split = steps_split_;
  // A headspace run: the steps before the replay began are not data-free.
  r.headspace = headspace_;
  if (r.headspace.replayed)
    for (const StepResult& s : r.steps)
      if (s.start_ns < r.headspace.replay_start_ns) ++r.headspace.steps_before;
  summarize_steps(r, opt_, step_walls_, r.headspace.steps_before);
  finish_gaps(r);
  r.dataloaders = loaders_.finish([this](uint32_t pid) { return producer_cpu_ns(pid, 0); });
  if (finder_.has_trainer()) {
    double data = 0;
    for (size_t p = 0; p < kPartCount; ++p)
      if (is_data(Part(p))) data += r.parts[p].share;
    r.feed = producers_.finish(finder_.trainer_track(), r.steps.size(), data,
                               [this](uint32_t pid, uint32_t tid) { return producer_cpu_ns(pid, tid); });
  }
  r.settings = std::move(settings_);
  close_open_phases();
  for (auto& [name, p] : phases_) r.phases.push_back(p);
  if (trainer_proc_ < trace_.procs.size()) r.command = trace_.procs[trainer_proc_].cmdline;
  stats_.nccl_joined = nccl_join_.matched();
  stats_.nccl_unjoined = nccl_join_.unmatched();
  build_capacity(r, stats_, trace_);
  RemedyContext ctx{r, stats_, trace_.probes, mean_step_ms(r), trace_.procs, trace_.origin,
                    trace_.imported.single_process_loader};
  r.remedies = propose_remedies(ctx, opt_.max_remedies, &r.rejected_remedies);
  for (Timeline* t : {&typical_, &longest_})
    if (!t->lanes.empty()) r.timelines.push_back(std::move(*t));
  r.drops = drops_;
  collectives_.take(r);
  r.warnings = std::move(warnings_);
  add_warnings(r);
  if (trace_.origin == TraceOrigin::kProfilerImport) add_import_notes(r);
  return r;
}

// What a profiler trace cannot say, first among the warnings: its summary,
// the unsplit data stall, a loader without workers, how the steps were
// found; then the importer's own warnings.
void RankEngine::add_import_notes(RankReport& r) const {
  const ImportFacts& f = trace_.imported;
  std::vector<std::string> notes = {f.summary};
  if (mean_part_ms(r, Part::kDataUnknown) > 0)
    notes.push_back(
        "a profiler trace does not show the DataLoader's workers: the data stall cannot be "
        "split into storage and preprocessing (run under `stallscope run` to split it)");
  if (f.single_process_loader)
    notes.push_back("the DataLoader ran without workers (_SingleProcessDataLoaderIter): its loading "
                    "ran on the trainer thread, inside each data wait");
  if (r.source == StepSource::kWholeTrace)
    notes.push_back("no ProfilerStep#N and nothing that repeats like a step: the whole trace is "
                    "analyzed as one window (step times are not per step)");
  else if (f.profiler_steps == 0 && r.source != StepSource::kNone)
    notes.push_back("no ProfilerStep#N in the trace: steps " +
                    std::string(r.source == StepSource::kInferred ? "inferred from the " : "from ") +
                    r.source_detail);
  notes.insert(notes.end(), f.warnings.begin(), f.warnings.end());
  r.warnings.insert(r.warnings.begin(), notes.begin(), notes.end());
}

void RankEngine::add_warnings(RankReport& r) const {
  auto& w = r.warnings;
  if (r.source == StepSource::kNone) w.push_back("no steps found: no step events, no ranges matching the step pattern, no hand-offs to a trainer thread, no data waits");
  if (r.source == StepSource::kWholeTrace && trace_.origin != TraceOrigin::kProfilerImport)
    w.push_back("no step events, no ranges matching the step pattern, no hand-offs to a trainer thread, no data waits: the whole trace is analyzed as one window (mark steps: stallscope.step(), a range named step, or --step-pattern)");
  const size_t closed = steps_closed_;
  if (closed > 0 && r.source == StepSource::kDataWaits)
    w.push_back("the last step (from the last data wait to the last event) is partial: closed by the analyzer");
  else if (closed > 0 && r.source == StepSource::kHandoffs)
    w.push_back("the last step (from the last hand-off to the last event) is partial: closed by the analyzer");
  else if (closed > 0)
    w.push_back(std::to_string(closed) + " step(s) had no end event; closed at the next step's start or the last event");
  if (r.source == StepSource::kHandoffs && !r.feed.relays.empty() &&
      double(r.feed.items) > 1.25 * double(r.steps.size()))
    w.push_back(std::to_string(r.feed.items) + " objects reached the trainer through a relay but it waited for " +
                std::to_string(r.steps.size()) +
                ": a relay shows only the gets that waited, so a step may hold several objects "
                "(mark steps: stallscope.step() or a range named step)");
  if (finder_.unmatched_ends() > 0) w.push_back(std::to_string(finder_.unmatched_ends()) + " step end event(s) without a begin ignored");
  if (stats_.nccl_joined == 0 && stats_.nccl_unjoined > 0)
    w.push_back(std::to_string(stats_.nccl_unjoined) +
                " NCCL kernel(s) but none tied to its NCCL call (neither the preload shim's nor the "
                "NCCL profiler plugin's events were recorded): no communicator, no bus bandwidth");
  if (cpu_unknown_seen_) w.push_back("no CPU samples for the trainer thread: host time not split into on-CPU and blocked (counted on-CPU)");
  if (r.compute_basis == "cpu_only") w.push_back("no device activity: a CPU-only trainer; compute = the trainer thread's on-CPU time");
  if (r.compute_basis == "gpu_not_recorded") w.push_back("API calls but no device activity recorded: GPU activity was not captured; compute = the trainer thread's on-CPU time");
  if (r.drops.late_events > 0) w.push_back(std::to_string(r.drops.late_events) + " event(s) arrived after their step was attributed and were ignored (they came later than the wait for late events: --lag SECONDS fixes a longer one)");
  for (const auto& l : r.dataloaders)
    if (l.unjoined_batches > 0)
      w.push_back("DataLoader at " + (l.site.empty() ? std::string("?") : l.site) + ": " +
                  std::to_string(l.unjoined_batches) +
                  " batch(es) received with no worker fetch recorded (a worker's trace file "
                  "missing or cut): their waits are split without the hooks' records");
  if (r.split & kSplitInferred) w.push_back("data stall split inferred from producer activity (no batch lineage) for some steps");
  if (r.drops.buffer_dropped + r.drops.disk_dropped > 0) w.push_back("events were dropped while recording: parts may be undercounted");
  // Reads of memory-mapped files the sampler counted but nothing timed.
  double faults = 0;
  size_t threads = 0;
  for (const auto& [key, c] : stats_.major_faults) {
    faults += c.delta();
    threads += c.delta() > 0 ? 1 : 0;
  }
  if (faults >= 1 && stats_.fault_reads == 0)
    w.push_back(std::to_string(static_cast<uint64_t>(faults)) + " major page fault(s) in " +
                std::to_string(threads) +
                " thread(s): reads of memory-mapped files of unknown name, not timed (page-fault "
                "sampling refused or off); their time is not counted as storage");
}

}  // namespace stallscope::analyzer
