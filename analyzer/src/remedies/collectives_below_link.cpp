// Collectives far below the link they cross: large NCCL operations among
// the GPUs of one host whose bus bandwidth (nccl-tests' busbw, docs/gpu.md)
// stays under a third of the GPU's NVLink or PCIe link. NCCL then uses a
// slow transport (P2P disabled, through host memory, across the CPU's
// socket link) or a wrong topology. Judged on the fast end of the
// collectives (the 90th percentile): a kernel's device time also holds its
// wait for the last rank, and the fastest kernels are those no rank waited
// in. Multi-host communicators are not judged: the network's rate is not
// recorded.
#include <algorithm>

#include "probes.hpp"
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// NVML gives no rate per NVLink link; NVLink 2, 3 and 4 carry 25 GB/s per
// link and direction (NVLink 5: 50). A bound for newer GPUs.
constexpr double kNvlinkGbps = 25.0;
constexpr double kAttainable = 0.8;  // what NCCL's large operations reach of a link
constexpr double kBelow = 1.0 / 3;   // flagged below this share of the link

struct Link {
  double bytes_per_s = 0;
  std::string text;
};

Link collective_link(const GpuLink& g) {
  if (g.nvlinks_active > 0)
    return {g.nvlinks_active * kNvlinkGbps * 1e9,
            strf("%d NVLink links, %.0f GB/s at 25 GB/s per link (NVLink 2-4)",
                 g.nvlinks_active, g.nvlinks_active * kNvlinkGbps)};
  if (g.gbps > 0) return {g.gbps * 1e9, describe_link(g)};
  return {};
}

double p90(std::vector<float> v) {
  if (v.empty()) return 0;
  const size_t k = (v.size() * 9) / 10;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

class CollectivesBelowLink final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kCollectivesBelowLink; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double transfer = c.ms(Part::kCommTransfer);
    if (transfer < 0.1 * c.step_ms || c.s.large_bus_bw.values().size() < 3 || c.p.ranks_on_node <= 0)
      return std::nullopt;
    // Only communicators that fit on this host.
    for (const auto& [key, b] : c.s.coll_bw)
      if (b.large > 0 && key.second > uint32_t(c.p.ranks_on_node)) return std::nullopt;
    const GpuLink* gpu = rank_gpu(c.p);
    if (gpu == nullptr) gpu = h2d_link(c.p);  // the host's slowest known link: a bound
    if (gpu == nullptr) return std::nullopt;
    const Link link = collective_link(*gpu);
    if (link.bytes_per_s <= 0) return std::nullopt;
    const double bw = p90(c.s.large_bus_bw.values());
    if (bw <= 0 || bw >= kBelow * link.bytes_per_s) return std::nullopt;
    Remedy m = make_remedy(
        c, RemedyId::kCollectivesBelowLink, "Collectives run far below the GPUs' link",
        "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH: check the transport (P2P/NVLink, not "
        "SHM or NET) and that NCCL_P2P_DISABLE / NCCL_SHM_DISABLE are unset",
        "the same NCCL checks; DDP(bucket_cap_mb=...) for fewer, larger all-reduces");
    m.predicted_step_ms = below_link_predicted_ms(c.step_ms, transfer, bw, link.bytes_per_s);
    m.bound = true;
    m.inputs_from = "topology";
    m.model = "bound: step - exposed_transfer * (1 - bus_bandwidth_p90 / (0.8 * link_bandwidth))";
    m.inputs = {{"exposed_transfer_ms", transfer, "ms"},
                {"bus_bandwidth_p90", bw, "B/s"},
                {"link_bandwidth", link.bytes_per_s, "B/s"}};
    m.evidence = strf("collectives of %llu MiB or more reach a bus bandwidth of %.1f GB/s "
                      "(90th percentile of %zu), %.0f %% of the link (",
                      static_cast<unsigned long long>(kLargeCollective >> 20), bw / 1e9,
                      c.s.large_bus_bw.values().size(), 100 * bw / link.bytes_per_s) +
                 link.text + ")";
    return m;
  }
};

}  // namespace

const RemedyRule& collectives_below_link_rule() {
  static const CollectivesBelowLink rule;
  return rule;
}

double below_link_predicted_ms(double step_ms, double transfer_ms, double bus_bw, double link_bw) {
  if (link_bw <= 0) return step_ms;
  return std::clamp(step_ms - transfer_ms * (1 - bus_bw / (kAttainable * link_bw)), 0.0, step_ms);
}

}  // namespace stallscope::analyzer
