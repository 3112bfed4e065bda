// Overlap communication with compute (gradient bucketing) or use larger
// per-rank batches, when exposed collective transfer is a large part.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// Gradients are ready only during backward, so only backward can hide their
// all-reduce; backward is about twice forward (assumed: kernel names do not
// say which pass a kernel belongs to).
constexpr double kBackwardShare = 2.0 / 3.0;

class OverlapComm final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kOverlapComm; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double transfer = c.ms(Part::kCommTransfer);
    const double compute = c.ms(Part::kCompute);
    if (transfer < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(
        c, RemedyId::kOverlapComm, "Overlap communication with compute, or larger per-rank batches",
        "none (trainer side)", "DDP(bucket_cap_mb=...), gradient accumulation / larger batch");
    m.predicted_step_ms = c.step_ms - std::min(transfer, kBackwardShare * compute);
    m.model = "step - min(exposed_transfer, backward_share * compute)";
    m.evidence = strf("collectives are exposed %.2f ms per step (%.0f %%)", transfer,
                      100 * c.share(Part::kCommTransfer));
    m.inputs = {{"exposed_transfer_ms", transfer, "ms"},
                {"compute_ms", compute, "ms"},
                {"backward_share", kBackwardShare, ""}};
    return m;
  }
};

}  // namespace

const RemedyRule& overlap_comm_rule() {
  static const OverlapComm rule;
  return rule;
}

}  // namespace stallscope::analyzer
