// Avoid per-step device-to-host syncs (loss.item() every step): the device
// idles from the sync's return until the host launches the next work.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class AvoidSync final : public RemedyRule {
 public:
  std::string_view id() const override { return "avoid_sync"; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double after = c.ms(Part::kHostAfterSync);
    const double launch = c.ms(Part::kHostLaunch);
    if (after < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(c, "avoid_sync", "Avoid per-step device-to-host syncs",
                           "none (trainer side)",
                           "read loss.item() every N steps; keep metrics on the device");
    m.predicted_step_ms = c.step_ms - std::max(0.0, after - launch);
    m.model = "step - (host_after_sync - host_launch)";
    m.evidence = strf("the device idles %.2f ms per step after blocking syncs return", after);
    m.inputs = {{"host_after_sync_ms", after, "ms"}, {"host_launch_ms", launch, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& avoid_sync_rule() {
  static const AvoidSync rule;
  return rule;
}

}  // namespace stallscope::analyzer
