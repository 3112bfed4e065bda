// Cache decoded samples or move augmentation to the GPU: preprocessing
// stalls the trainer and the rank's CPUs are already saturated.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class CacheDecoded final : public RemedyRule {
 public:
  std::string_view id() const override { return "cache_decoded"; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double pre = c.ms(Part::kDataPreprocess);
    if (pre < 0.1 * c.step_ms) return std::nullopt;
    const auto& cpu = c.r.cpu;
    const bool saturated = cpu.known && (cpu.idle_during_stalls >= 0 ? cpu.idle_during_stalls < 1
                                                                     : cpu.used_cores >= 0.9 * cpu.budget_cores);
    if (!saturated && cpu.throttled_periods <= 0) return std::nullopt;
    Remedy m = make_remedy(c, "cache_decoded", "Cache decoded samples or augment on the GPU",
                           "cache decoded samples (loader dataset cache) or lighten the transform",
                           "cache decoded tensors; GPU augmentation (DALI, torchvision.transforms.v2 on cuda)");
    m.predicted_step_ms = c.step_ms - pre;
    m.bound = true;
    m.inputs_from = "assumed";
    m.model = "bound: step - preprocess_stall (decode cost removed entirely)";
    m.evidence = strf("CPUs saturated (%.1f of %.1f cores used, %.1f idle during stalls, "
                      "%.0f throttled periods); preprocessing stalls %.2f ms per step",
                      cpu.used_cores, cpu.budget_cores, cpu.idle_during_stalls, cpu.throttled_periods, pre);
    m.inputs = {{"used_cores", cpu.used_cores, ""}, {"budget_cores", cpu.budget_cores, ""},
                {"preprocess_stall_ms", pre, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& cache_decoded_rule() {
  static const CacheDecoded rule;
  return rule;
}

}  // namespace stallscope::analyzer
