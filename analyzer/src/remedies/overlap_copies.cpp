// Overlap copies with compute (copy stream, double buffering): exposed H2D
// time can hide behind the step's own compute.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class OverlapCopies final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kOverlapCopies; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double h2d = c.ms(Part::kCopyH2D) + c.ms(Part::kCopyOther);
    const double compute = c.ms(Part::kCompute);
    if (h2d < 0.05 * c.step_ms || compute <= 0) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kOverlapCopies, "Overlap copies with compute",
                           "--loader-prefetch >= 2 (the loader copies on its own stream)",
                           "non_blocking=True with pin_memory=True, a side CUDA stream, double buffering");
    m.predicted_step_ms = c.step_ms - std::min(h2d, compute);
    m.model = "step - min(exposed_copies, compute)";
    m.evidence = strf("copies are exposed %.2f ms per step while compute runs %.2f ms", h2d, compute);
    m.inputs = {{"exposed_copies_ms", h2d, "ms"}, {"compute_ms", compute, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& overlap_copies_rule() {
  static const OverlapCopies rule;
  return rule;
}

}  // namespace stallscope::analyzer
