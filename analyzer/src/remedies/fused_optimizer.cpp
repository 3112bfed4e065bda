// A fused or foreach optimizer when the optimizer step's host work keeps the
// device idle (CPU time inside Optimizer.step#… in the host gaps): one
// multi-tensor kernel per group instead of a few kernels per parameter.
#include <string>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// "Optimizer.step#AdamW.step" -> "AdamW"; "" when the name does not say.
std::string optimizer_class(const std::string& name) {
  const std::string prefix = "Optimizer.step#";
  if (name.rfind(prefix, 0) != 0) return "";
  const std::string rest = name.substr(prefix.size());
  return rest.substr(0, rest.find('.'));
}

class FusedOptimizer final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kFusedOptimizer; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const HostGapReport& g = c.r.host_gaps;
    if (!g.analyzed || g.optimizer_ms < 0.1 * c.step_ms) return std::nullopt;
    std::string cls = optimizer_class(g.optimizer);
    if (cls.empty()) cls = "<Optimizer>";
    Remedy m = make_remedy(c, RemedyId::kFusedOptimizer, "Use a fused or foreach optimizer",
                           "none (trainer side)",
                           "torch.optim." + cls + "(params, fused=True) (or foreach=True)");
    m.predicted_step_ms = c.step_ms - g.optimizer_ms;
    m.bound = true;
    m.inputs_from = "run";
    m.model = "bound: step - host gap time inside the optimizer step (the fused kernels' own "
              "time not modelled)";
    m.evidence = strf("the device idles %.2f ms per step while the host runs the optimizer step",
                      g.optimizer_ms) +
                 (g.optimizer.empty() ? std::string() : " (" + g.optimizer + ")") +
                 gap_top_text(g.of(GapClass::kLaunch), g.of(GapClass::kCpuOp));
    m.inputs = {{"optimizer_gap_ms", g.optimizer_ms, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& fused_optimizer_rule() {
  static const FusedOptimizer rule;
  return rule;
}

}  // namespace stallscope::analyzer
