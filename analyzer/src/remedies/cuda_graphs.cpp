// CUDA graphs or larger kernels when launch overhead keeps the device idle:
// the launch/API part, or the launch-bound host gaps (kernels no longer
// than the calls that launch them), whichever is larger.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class CudaGraphs final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kCudaGraphs; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double launch = c.ms(Part::kHostLaunch);
    const HostGapReport& g = c.r.host_gaps;
    const double gaps = g.analyzed ? g.of(GapClass::kLaunch).ms : 0;
    const double recoverable = std::max(launch, gaps);
    if (recoverable < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kCudaGraphs, "Capture the step in a CUDA graph or fuse kernels",
                           "none (trainer side)",
                           "torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")");
    m.predicted_step_ms = c.step_ms - recoverable;
    m.bound = true;
    m.inputs_from = "assumed";
    m.inputs = {{"host_launch_ms", launch, "ms"}};
    if (gaps > 0 && gaps >= launch) {
      m.model = "bound: step - launch-bound gap time (graph replay cost not modelled)";
      m.evidence = strf("the device idles %.2f ms per step in launch-bound gaps (kernels no longer "
                        "than the calls that launch them, %.1f launches per step in them)",
                        gaps, g.launches) +
                   gap_top_text(g.of(GapClass::kLaunch));
      m.inputs.push_back({"launch_gap_ms", gaps, "ms"});
      m.inputs.push_back({"launches_per_step", g.launches, ""});
    } else {
      m.model = "bound: step - host_launch (graph replay cost not modelled)";
      m.evidence = strf("the device idles %.2f ms per step while the trainer is in launch/API calls "
                        "(%.0f calls)", launch, double(c.s.launches));
    }
    return m;
  }
};

}  // namespace

const RemedyRule& cuda_graphs_rule() {
  static const CudaGraphs rule;
  return rule;
}

}  // namespace stallscope::analyzer
