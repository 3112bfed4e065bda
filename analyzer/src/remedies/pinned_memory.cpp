// Pinned memory for pageable host-to-device copies: pageable copies go
// through a staging buffer at a fraction of the pinned bandwidth.
#include "probes.hpp"
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class PinnedMemory final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kPinnedMemory; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double h2d = c.ms(Part::kCopyH2D);
    const double pageable = double(c.s.h2d_bytes[0]), pinned = double(c.s.h2d_bytes[1]);
    if (h2d < 0.05 * c.step_ms) return std::nullopt;
    if (pageable <= pinned)
      return reject(RemedyId::kPinnedMemory, "pinned memory",
                    pageable + pinned <= 0
                        ? strf("exposed H2D takes %.2f ms per step, but no copy's bytes were "
                               "recorded as pageable or pinned", h2d)
                        : strf("%.0f %% of H2D bytes are already pinned (exposed H2D %.2f ms per "
                               "step): pinning the rest gains little",
                               100.0 * pinned / (pageable + pinned), h2d));
    // Without a DataLoader record (an imported profiler trace, a loader of
    // the program's own) the copies may come from a DataLoader or not: both
    // settings, the DataLoader's and the tensor's.
    Remedy m = make_remedy(c, RemedyId::kPinnedMemory, "Stage host-to-device copies in pinned memory",
                           "--loader-pinned=on (or --set loader.pinned=true)",
                           "DataLoader(pin_memory=True); for tensors not from a DataLoader, "
                           "t.pin_memory() and t.to(device, non_blocking=True)");
    m.settings = loader_settings(c, {{"pinned", "true"}});
    const double page_bw = c.figure(StageKind::kPinH2D, Fig::kPageableBandwidth).value_or(0);
    double pin_bw = c.figure(StageKind::kPinH2D, Fig::kPinnedBandwidth).value_or(0);
    m.inputs = {{"h2d_exposed_ms", h2d, "ms"}, {"pageable_bandwidth", page_bw, "B/s"}};
    if (pin_bw <= 0 && c.p.pinned_gbps > 0) {
      pin_bw = c.p.pinned_gbps * 1e9;
      m.inputs_from = "probe:device_model";
    }
    const GpuLink* link = pin_bw <= 0 ? h2d_link(c.p) : nullptr;
    if (pin_bw > page_bw && page_bw > 0) {
      m.predicted_step_ms = c.step_ms - h2d * (1 - page_bw / pin_bw);
      m.model = "step - h2d_exposed * (1 - pageable_bandwidth / pinned_bandwidth)";
      m.inputs.push_back({"pinned_bandwidth", pin_bw, "B/s"});
    } else if (link != nullptr && link->gbps * 1e9 > page_bw && page_bw > 0) {
      // Pinned copies cannot beat the link: the link's rate gives a bound.
      const double link_bw = link->gbps * 1e9;
      m.predicted_step_ms = c.step_ms - h2d * (1 - page_bw / link_bw);
      m.bound = true;
      m.inputs_from = "topology";
      m.model =
          "bound: step - h2d_exposed * (1 - pageable_bandwidth / link_bandwidth) "
          "(pinned bandwidth not measured; at most the GPU's PCIe link: " +
          describe_link(*link) + ")";
      m.inputs.push_back({"link_bandwidth", link_bw, "B/s"});
    } else {
      m.predicted_step_ms = c.step_ms - h2d;
      m.bound = true;
      m.inputs_from = "assumed";
      m.model = "bound: step - h2d_exposed (pinned bandwidth not measured or probed)";
    }
    m.evidence = strf("%.0f %% of H2D bytes are pageable; exposed H2D %.2f ms per step",
                      100.0 * pageable / (pageable + pinned), h2d);
    if (const DataLoaderReport* l = fed_loader(c.r)) {
      m.loader_knob = "none";
      if (l->pin_memory == "on") {
        // Its batches are pinned already: pin_memory=True again changes
        // nothing; the pageable copies are of other tensors.
        m.pytorch_knob =
            "t.pin_memory() and t.to(device, non_blocking=True) for the tensors copied "
            "outside the DataLoader's batches (its pin_memory is on already)";
        m.settings.clear();
        m.evidence += "; the DataLoader pins its batches, yet these copies are pageable (not its batches)";
        return m;
      }
      m.pytorch_knob = dataloader_knob(*l, {{"pin_memory", "True"}});
      m.settings = dataloader_settings(c, *l, {{"pin_memory", "True"}});
      if (l->pin_memory == "inactive")
        m.evidence += "; the DataLoader asked for pin_memory=True but torch turned it off (no "
                      "accelerator seen when the iterator started)";
    }
    return m;
  }
};

}  // namespace

const RemedyRule& pinned_memory_rule() {
  static const PinnedMemory rule;
  return rule;
}

}  // namespace stallscope::analyzer
