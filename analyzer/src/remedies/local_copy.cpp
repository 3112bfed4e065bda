// Copy or cache the dataset on local NVMe when most bytes come from network
// or FUSE storage and storage stalls the trainer.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class LocalCopy final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kLocalCopy; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double storage = c.ms(Part::kDataStorage);
    const auto& net = c.s.tiers[static_cast<size_t>(format::Tier::kNetwork)];
    uint64_t bytes = 0;
    for (const auto& t : c.s.tiers) bytes += t.bytes;
    if (storage < 0.1 * c.step_ms || bytes == 0 || net.bytes * 2 < bytes) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kLocalCopy, "Copy or cache the dataset on local NVMe",
                           "point the loader's dataset at a local copy",
                           "copy the dataset to local disk first (or a caching Dataset)");
    const double net_bw = net.busy_ns > 0 ? double(net.bytes) / (double(net.busy_ns) / 1e9) : 0;
    m.inputs = {{"network_bytes_share", double(net.bytes) / double(bytes), ""},
                {"network_bandwidth", net_bw, "B/s"}, {"storage_stall_ms", storage, "ms"}};
    if (c.p.local_bytes_per_s > net_bw && net_bw > 0) {
      m.predicted_step_ms = c.step_ms - storage * (1 - net_bw / c.p.local_bytes_per_s);
      m.inputs_from = "probe:local_storage";
      m.inputs.push_back({"local_bandwidth", c.p.local_bytes_per_s, "B/s"});
      m.model = "step - storage_stall * (1 - network_bandwidth / local_bandwidth)";
    } else {
      m.predicted_step_ms = c.step_ms - storage;
      m.bound = true;
      m.inputs_from = "assumed";
      m.model = "bound: step - storage_stall (local read rate not probed)";
    }
    m.evidence = strf("%.0f %% of bytes come from network/FUSE storage at %.0f MB/s",
                      100.0 * double(net.bytes) / double(bytes), net_bw / 1e6);
    return m;
  }
};

}  // namespace

const RemedyRule& local_copy_rule() {
  static const LocalCopy rule;
  return rule;
}

}  // namespace stallscope::analyzer
