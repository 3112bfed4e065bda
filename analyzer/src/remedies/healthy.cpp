// The healthy verdict: compute covers at least 90 % of step time, so no
// input or host remedy can gain much.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class Healthy final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kHealthy; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double share = c.share(Part::kCompute);
    if (share < 0.9) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kHealthy, "Healthy: compute-bound", "none", "none");
    m.model = "compute >= 90 % of step time";
    m.evidence = strf("compute is %.0f %% of step time", share * 100);
    m.inputs = {{"compute_share", share, ""}};
    return m;
  }
};

}  // namespace

const RemedyRule& healthy_rule() {
  static const Healthy rule;
  return rule;
}

}  // namespace stallscope::analyzer
