// A larger batch when a fixed per-step host cost dominates: the host gaps
// (syncs, launches, CPU operators, untraced time) do not grow with the
// batch, the device's work does; at twice the batch the fixed cost is
// spread over twice the samples.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

constexpr double kFactor = 2;  // the batch multiple the prediction is for

class LargerBatch final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kLargerBatch; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const HostGapReport& g = c.r.host_gaps;
    if (!g.analyzed || c.step_ms <= 0) return std::nullopt;
    const double fixed = g.host_ms - g.of(GapClass::kData).ms;
    if (fixed < 0.3 * c.step_ms) return std::nullopt;
    // Per-sample time at k× the batch, in the units of today's step.
    const double step_k = fixed + kFactor * (c.step_ms - fixed);
    const double ratio = kFactor * c.step_ms / step_k;  // samples/s after ÷ before
    Remedy m = make_remedy(c, RemedyId::kLargerBatch, "Raise the batch size", "none (trainer side)",
                           "DataLoader(batch_size=2 × today's) with the learning rate scaled");
    m.predicted_step_ms = step_k / kFactor;
    m.inputs_from = "assumed";
    m.model = "per sample at 2x the batch: (fixed + 2 x (step - fixed)) / 2; fixed = host gaps "
              "outside data loading (device time assumed to grow with the batch)";
    m.evidence = strf("a fixed host cost of %.2f ms per step (sync %.2f, launch %.2f, cpu_op %.2f, "
                      "untraced %.2f) does not grow with the batch: at 2x the batch, samples/s "
                      "x%.2f",
                      fixed, g.of(GapClass::kSync).ms, g.of(GapClass::kLaunch).ms,
                      g.of(GapClass::kCpuOp).ms, g.of(GapClass::kUntraced).ms, ratio);
    m.inputs = {{"fixed_host_ms", fixed, "ms"}, {"samples_per_s_ratio", ratio, ""}};
    for (const DataLoaderReport& l : c.r.dataloaders) {
      if (!l.fed_optimizer || l.batch_size == 0) continue;
      const double now = double(l.batch_size) * 1e3 / c.step_ms;
      m.evidence += strf(" (%.0f -> %.0f samples/s at batch_size %u -> %u)", now, now * ratio,
                         l.batch_size, 2 * l.batch_size);
      m.inputs.push_back({"samples_per_s", now, "1/s"});
      m.inputs.push_back({"predicted_samples_per_s", now * ratio, "1/s"});
      break;
    }
    m.evidence += "; a larger batch changes the optimization: scale the learning rate (linear "
                  "scaling with warm-up) and check convergence";
    return m;
  }
};

}  // namespace

const RemedyRule& larger_batch_rule() {
  static const LargerBatch rule;
  return rule;
}

}  // namespace stallscope::analyzer
