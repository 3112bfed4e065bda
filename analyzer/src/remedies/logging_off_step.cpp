// Logging and metrics off the step: print, logging, wandb, TensorBoard
// calls (and the .item() that feeds them) keep the device idle.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class LoggingOffStep final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kLoggingOffStep; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const HostGapReport& g = c.r.host_gaps;
    if (!g.analyzed || g.logging_ms < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kLoggingOffStep, "Log and compute metrics off the step",
                           "none (trainer side)",
                           "log every N steps, or from a background thread; accumulate metrics "
                           "on the device (no .item() per step)");
    m.predicted_step_ms = c.step_ms - g.logging_ms;
    m.model = "step - host gap time under logging or metrics calls (and the syncs feeding them)";
    m.evidence = strf("the device idles %.2f ms per step while the host logs", g.logging_ms) +
                 (g.logging.empty() ? std::string() : " (" + g.logging + ")");
    if (!g.sync_call.empty() && g.of(GapClass::kSync).ms > 0)
      m.evidence += "; after " + g.sync_call;
    m.inputs = {{"logging_gap_ms", g.logging_ms, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& logging_off_step_rule() {
  static const LoggingOffStep rule;
  return rule;
}

}  // namespace stallscope::analyzer
