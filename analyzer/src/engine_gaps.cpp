// The host gaps of each finalized step (host_gaps.hpp): the trainer's
// activities over the step, classed gap by gap, summed over the steady steps.
#include <algorithm>

#include "engine.hpp"

namespace stallscope::analyzer {

namespace {

int64_t host_parts(const StepResult& r) {
  return r.parts[idx(Part::kHostAfterSync)] + r.parts[idx(Part::kHostLaunch)] +
         r.parts[idx(Part::kHostCpu)] + r.parts[idx(Part::kHostBlocked)];
}

}  // namespace

void RankEngine::classify_gaps(const StepCand& c, StepResult& r) {
  // Taken for every step, so that the channels' windows move on.
  step_acts_.clear();
  if (TrainerChans* tc = trainer_chans()) tc->acts.take(c.start, c.end, step_acts_);
  const auto it = samples_.find({trainer_proc_, trainer_tid_});
  if (it != samples_.end()) it->second.take(c.start, c.end, step_acts_);
  if (!device_seen_) return;  // no device-idle gaps: nothing to class
  ops_window_.take(trace_.trainer_spans, c.start, c.end, step_acts_);
  // The first steps' totals stay apart until warm-up is known.
  GapTotals* t = &gap_totals_;
  if (gap_early_.size() < opt_.warmup_max && steps_.size() < opt_.warmup_max) {
    gap_early_.emplace_back(c.start, GapTotals{});
    t = &gap_early_.back().second;
  }
  r.gap_ns = gap_classifier_.classify(step_sets_.host, c.start, c.index, step_acts_, *t);
  ++t->steps;
  t->wall_ns += r.wall();
  t->host_ns += host_parts(r);
  for (size_t k = 0; k < kGapClassCount; ++k) t->class_ns[k] += r.gap_ns[k];
}

void RankEngine::finish_gaps(RankReport& r) {
  HostGapReport& g = r.host_gaps;
  if (!device_seen_) {
    g.note = "no device activity: no device-idle gaps (host time not classed)";
    return;
  }
  std::vector<int64_t> warm;
  for (size_t i = 0; i < r.warmup_steps && i < r.steps.size(); ++i) warm.push_back(r.steps.peek(i).start_ns);
  std::sort(warm.begin(), warm.end());
  for (const auto& [start, t] : gap_early_)
    if (!std::binary_search(warm.begin(), warm.end(), start)) gap_totals_.merge(t);
  gap_early_.clear();
  fill_host_gaps(g, gap_totals_, trace_.names);
}

}  // namespace stallscope::analyzer
