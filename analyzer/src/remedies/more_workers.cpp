// More preprocessing workers — only when usable CPUs sat idle while the
// trainer waited for preprocessed data (otherwise more workers just share
// the same saturated CPUs).
#include <algorithm>
#include <cmath>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class MoreWorkers final : public RemedyRule {
 public:
  std::string_view id() const override { return "more_workers"; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double pre = c.ms(Part::kDataPreprocess);
    const double workers = c.figure(StageKind::kPreprocess, Fig::kWorkers).value_or(0);
    const double idle = c.r.cpu.idle_during_stalls;
    const double spare = c.r.cpu.known ? c.r.cpu.budget_cores - c.r.cpu.used_cores : 0;
    // Half an idle CPU or more counts as one more worker's worth.
    const double add = std::floor(std::min(idle, spare) + 0.5);
    if (pre < 0.1 * c.step_ms || workers <= 0 || add < 1) return std::nullopt;
    Remedy m = make_remedy(c, "more_workers", "Add preprocessing workers",
                           "--loader-workers / STALLSCOPE_LOADER_WORKERS", "DataLoader(num_workers=...)");
    const double w2 = workers + add;
    m.predicted_step_ms = c.step_ms - pre * (1 - workers / w2);
    m.model = "step - preprocess_stall * (1 - workers / (workers + usable idle CPUs))";
    m.evidence = strf("%.1f CPUs of the rank's budget were idle during data stalls; "
                      "preprocessing stalls %.2f ms per step with %.0f workers", idle, pre, workers);
    m.inputs = {{"workers", workers, ""}, {"suggested_workers", w2, ""},
                {"idle_cpus_during_stalls", idle, ""}, {"spare_cores", spare, ""},
                {"preprocess_stall_ms", pre, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& more_workers_rule() {
  static const MoreWorkers rule;
  return rule;
}

}  // namespace stallscope::analyzer
