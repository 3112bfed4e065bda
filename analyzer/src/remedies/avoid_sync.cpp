// Avoid per-step device-to-host syncs (loss.item() every step): the device
// idles from the sync's return until the host launches the next work. With
// host gaps classed, the sync gaps name the call and what made it.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class AvoidSync final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kAvoidSync; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double after = c.ms(Part::kHostAfterSync);
    const double launch = c.ms(Part::kHostLaunch);
    const HostGapReport& g = c.r.host_gaps;
    const double drained = g.analyzed ? g.of(GapClass::kSync).ms : after;
    if (drained < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kAvoidSync, "Avoid per-step device-to-host syncs",
                           "none (trainer side)",
                           "read loss.item() every N steps; keep metrics on the device");
    m.inputs = {{"host_after_sync_ms", after, "ms"}, {"host_launch_ms", launch, "ms"}};
    // The next work must still be launched: its launch time stays.
    if (!g.analyzed) {
      m.predicted_step_ms = c.step_ms - std::clamp(after - launch, 0.0, after);
      m.model = "step - (host_after_sync - host_launch)";
      m.evidence = strf("the device idles %.2f ms per step after blocking syncs return", after);
      return m;
    }
    // Only the launches inside the sync gaps: those in other gaps (a
    // launch-bound stretch elsewhere in the step) stay whatever the sync does.
    const double sync_launch = g.of(GapClass::kSync).launch_ms;
    m.predicted_step_ms = c.step_ms - std::clamp(drained - sync_launch, 0.0, drained);
    m.model = "step - (sync gap time - launch calls inside the sync gaps)";
    m.inputs.push_back({"sync_gap_ms", drained, "ms"});
    m.inputs.push_back({"sync_gap_launch_ms", sync_launch, "ms"});
    m.evidence = strf("the device idles %.2f ms per step drained after synchronizations", drained);
    if (!g.sync_call.empty()) {
      m.evidence += "; the call: " + g.sync_call;
      if (!g.sync_made_by.empty()) m.evidence += ", made by " + g.sync_made_by;
      m.pytorch_knob = "move " + g.sync_call +
                       (g.sync_made_by.empty() ? std::string() : " (" + g.sync_made_by + ")") +
                       " off the step: read values every N steps, keep metrics on the device";
    }
    return m;
  }
};

}  // namespace

const RemedyRule& avoid_sync_rule() {
  static const AvoidSync rule;
  return rule;
}

}  // namespace stallscope::analyzer
