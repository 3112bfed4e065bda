// H2D copies far below the GPU's PCIe link: pinned copies that reach less
// than half of what the link carries are small, unbatched, or the GPU sits
// in a slower or narrower slot than it supports. The link comes from the
// "topology" attachment (probes.cpp).
#include "probes.hpp"
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// Well-batched pinned copies reach about this share of the link's rate.
constexpr double kAttainable = 0.8;
constexpr const char* kTitle = "Host-to-device copies run far below the GPU's PCIe link";
constexpr const char* kLoaderKnob =
    "--loader-pinned=on (one pinned staging copy per batch); "
    "check the slot: nvidia-smi -q -d PCIE";
constexpr const char* kPytorchKnob =
    "larger, batched copies from pinned memory (pin_memory=True, "
    "one .to(device, non_blocking=True) per batch); "
    "check the GPU's PCIe slot: nvidia-smi -q -d PCIE";

class H2dBelowLink final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kH2dBelowLink; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double h2d = c.ms(Part::kCopyH2D);
    const double pageable = double(c.s.h2d_bytes[0]), pinned = double(c.s.h2d_bytes[1]);
    const GpuLink* link = h2d_link(c.p);
    // Mostly pageable copies are pinned_memory's case, not this one.
    if (h2d < 0.05 * c.step_ms || link == nullptr || pinned <= 0 || pinned < pageable ||
        c.s.h2d_ns[1] <= 0)
      return std::nullopt;
    const double observed = pinned / (double(c.s.h2d_ns[1]) / 1e9);  // B/s
    const double link_bw = link->gbps * 1e9;
    if (observed >= 0.5 * link_bw) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kH2dBelowLink, kTitle, kLoaderKnob, kPytorchKnob);
    m.predicted_step_ms = c.step_ms - h2d * (1 - observed / (kAttainable * link_bw));
    m.bound = true;
    m.inputs_from = "topology";
    m.model =
        "bound: step - h2d_exposed * (1 - pinned_bandwidth / (0.8 * link_bandwidth)) "
        "(copies at 80 % of the link's rate)";
    m.inputs = {{"h2d_exposed_ms", h2d, "ms"},
                {"pinned_bandwidth", observed, "B/s"},
                {"link_bandwidth", link_bw, "B/s"}};
    m.evidence = strf("pinned H2D copies reach %.1f GB/s, %.0f %% of the GPU's link (",
                      observed / 1e9, 100.0 * observed / link_bw) +
                 describe_link(*link) + strf("); exposed H2D %.2f ms per step", h2d);
    return m;
  }
};

}  // namespace

const RemedyRule& h2d_below_link_rule() {
  static const H2dBelowLink rule;
  return rule;
}

}  // namespace stallscope::analyzer
