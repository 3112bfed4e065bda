// CUDA graphs or larger kernels when launch overhead keeps the device idle.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class CudaGraphs final : public RemedyRule {
 public:
  std::string_view id() const override { return "cuda_graphs"; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double launch = c.ms(Part::kHostLaunch);
    if (launch < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(c, "cuda_graphs", "Capture the step in a CUDA graph or fuse kernels",
                           "none (trainer side)",
                           "torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")");
    m.predicted_step_ms = c.step_ms - launch;
    m.bound = true;
    m.inputs_from = "assumed";
    m.model = "bound: step - host_launch (graph replay cost not modelled)";
    m.evidence = strf("the device idles %.2f ms per step while the trainer is in launch/API calls "
                      "(%.0f calls)", launch, double(c.s.launches));
    m.inputs = {{"host_launch_ms", launch, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& cuda_graphs_rule() {
  static const CudaGraphs rule;
  return rule;
}

}  // namespace stallscope::analyzer
