// Raise prefetch depth: the input stages keep up on average (capacity >=
// demand) yet the trainer still waits — bursts a deeper queue would absorb.
// "Keep up" must be measured: a stage the stall is attributed to that the
// run did not measure leaves the question open, and the rule abstains.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

constexpr const char* kTitle = "deeper prefetch";

// The depth: the batches the run's bursts asked for beyond today's, as
// stallscope's loader's prefetch or the DataLoader's prefetch_factor.
void set_depth(const RemedyContext& c, const DataLoaderReport* l, double min_capacity, Remedy& m) {
  const auto plan = prefetch_plan(c, min_capacity, l != nullptr ? producer_share(*l) : 1.0);
  const int extra = plan ? plan->extra_batches : 0;
  if (plan) {
    m.evidence += strf("; the producers fell up to %.1f batches behind (longest burst: %d "
                       "stalled step(s), %.1f ms)%s, so the queue needs %d more",
                       plan->peak_batches, plan->burst_steps, plan->burst_ms,
                       plan->capped ? " (capped)" : "", extra);
    m.model += "; depth + ceil(peak deficit), the deficit carried over steps as "
               "max(0, deficit + stall * capacity - (work * capacity - 1))";
    m.inputs.push_back({"peak_deficit_batches", plan->peak_batches, ""});
    m.inputs.push_back({"extra_batches", double(extra), ""});
  }
  if (c.p.prefetch_batches > 0) {
    m.inputs.push_back({"prefetch_batches", c.p.prefetch_batches, ""});
    const double next = extra > 0 ? c.p.prefetch_batches + extra : 2 * c.p.prefetch_batches;
    const std::string depth = strf("%.0f", next);
    m.loader_knob = "--loader-prefetch=" + depth + " (or --set loader.prefetch=" + depth + ")";
    m.settings = loader_settings(c, {{"prefetch", depth}});
  }
  if (l != nullptr) {
    // In flight: num_workers × prefetch_factor (torch's default 2); the
    // extra batches spread over the workers.
    const uint32_t pf0 = std::max<uint32_t>(l->prefetch_factor, 2);
    const uint32_t w = std::max<uint32_t>(l->num_workers, 1);
    const uint32_t pf1 = extra > 0 ? pf0 + (static_cast<uint32_t>(extra) + w - 1) / w : 2 * pf0;
    const std::string pf = std::to_string(pf1);
    m.loader_knob = "none";
    m.pytorch_knob = dataloader_knob(*l, {{"prefetch_factor", pf}});
    m.settings = dataloader_settings(c, *l, {{"prefetch_factor", pf}});
    m.inputs.push_back({"prefetch_factor", double(l->prefetch_factor), ""});
  }
}

class RaisePrefetch final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kRaisePrefetch; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    // Without workers a DataLoader has no prefetch at all. Its waits for
    // each later epoch's first batch are no burst a deeper queue absorbs:
    // the workers get their first indices only when the epoch begins (and
    // start again without persistent_workers), so they stay.
    const DataLoaderReport* l = fed_loader(c.r);
    if (l != nullptr && l->num_workers == 0) {
      if (c.data_ms() < 0.05 * c.step_ms) return std::nullopt;
      return reject(RemedyId::kRaisePrefetch, kTitle,
                    "the DataLoader loads on the trainer thread (num_workers=0): it has no "
                    "prefetch queue to deepen");
    }
    // Waits mostly outside the workers' fetches (the hand-off: pickling,
    // a trainer waiting for a CPU once the batch is there) are no producer
    // falling behind: no depth shortens them.
    const double share = l != nullptr ? fetch_share(*l) : 1.0;
    if (l != nullptr && share < 0.5) {
      if (c.data_ms() < 0.05 * c.step_ms) return std::nullopt;
      return reject(RemedyId::kRaisePrefetch, kTitle,
                    strf("the trainer's waits are mostly hand-offs (%.0f %% in the workers' "
                         "fetches): the batches were ready, no deeper queue makes them come sooner",
                         100 * share));
    }
    const double starts =
        l != nullptr && c.r.steady_steps > 0
            ? epoch_starts(*l).later_wait_ms / double(c.r.steady_steps) : 0;
    // The hand-off of batches already put (data.handoff) is no lateness.
    const double data = std::max(0.0, c.fetch_stall_ms() - starts);
    if (data < 0.05 * c.step_ms) return std::nullopt;
    // The stages behind the stall: an unsplit stall may be either.
    const bool unsplit = c.ms(Part::kDataUnknown) > 0;
    const bool need_storage = unsplit || c.ms(Part::kDataStorage) > 0;
    const bool need_pre = unsplit || c.ms(Part::kDataPreprocess) > 0;
    if ((need_storage && !c.measured(StageKind::kStorage)) ||
        (need_pre && !c.measured(StageKind::kPreprocess)))
      return std::nullopt;
    double min_capacity = 0, demand = 0;
    for (const StageKind k : {StageKind::kStorage, StageKind::kPreprocess}) {
      const Stage* st = c.stage(k);
      if (st == nullptr || !st->measured) continue;
      if (st->headroom() < 1.0)  // a stage is too slow: depth won't help
        return reject(RemedyId::kRaisePrefetch, kTitle,
                      strf("the %s stage does not keep up on average (%.1f batches/s against a "
                           "demand of %.1f): a deeper queue only delays the stall",
                           std::string(st->name()).c_str(), st->capacity, st->demand));
      if (min_capacity == 0 || st->capacity < min_capacity) min_capacity = st->capacity;
      demand = st->demand;
    }
    if (min_capacity == 0) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kRaisePrefetch, "Raise prefetch depth",
                           "--loader-prefetch / STALLSCOPE_LOADER_PREFETCH",
                           "DataLoader(prefetch_factor=...)");
    m.predicted_step_ms = std::max(c.step_ms - data, 1000.0 / min_capacity);
    m.model = "step - data_stall (less the waits for each later epoch's first batch), floored at 1 / slowest input stage capacity";
    m.evidence = strf("input stages keep up on average (slowest %.1f batches/s vs demand %.1f) "
                      "but data stalls take %.2f ms per step", min_capacity, demand, data);
    m.inputs = {{"data_stall_ms", data, "ms"}, {"slowest_stage_capacity", min_capacity, "1/s"}};
    if (starts > 0) {
      m.evidence += strf(" (beyond %.2f ms per step of waits for each epoch's first batch)", starts);
      m.inputs.push_back({"epoch_start_wait_ms", starts, "ms"});
    }
    set_depth(c, l, min_capacity, m);
    return m;
  }
};

}  // namespace

const RemedyRule& raise_prefetch_rule() {
  static const RaisePrefetch rule;
  return rule;
}

}  // namespace stallscope::analyzer
