// Raise io_uring queue depth or read size: storage-bound with few reads in
// flight (only when the reads recorded their queue depth). The gain comes from the loader's storage
// probe (read rates at several queue depths) when the trace holds one; otherwise it is a bound.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

constexpr double kReachedShare = 0.5;  // mean reads in flight / configured queue depth

class RaiseQueueDepth final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kRaiseQueueDepth; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double storage = c.ms(Part::kDataStorage);
    // Without a recorded queue depth (reads not issued by stallscope's
    // loader) nothing shows that too few reads were in flight: no remedy.
    if (c.figure(StageKind::kStorage, Fig::kReadsWithQueueDepth).value_or(0) <= 0) return std::nullopt;
    const double qd = c.figure(StageKind::kStorage, Fig::kMeanQueueDepth).value_or(0);
    if (storage < 0.1 * c.step_ms || qd >= 64) return std::nullopt;
    // Reads in flight far below the configured depth: something else (the
    // prefetch depth times the batch size) limits them, a deeper queue not.
    if (c.p.queue_depth > 0 && qd < kReachedShare * c.p.queue_depth) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kRaiseQueueDepth, "Raise io_uring queue depth or read size",
                           "--loader-queue-depth, --loader-read-size",
                           "more DataLoader num_workers (one read in flight each) or larger reads");
    const double bw = c.figure(StageKind::kStorage, Fig::kReadBandwidth).value_or(0);
    const StorageProbePoint* best = best_deeper(c.p, qd);
    m.inputs = {{"storage_stall_ms", storage, "ms"},
                {"mean_queue_depth", qd, ""},
                {"read_bandwidth", bw, "B/s"}};
    if (best != nullptr && bw > 0 && best->bytes_per_s > bw) {
      m.predicted_step_ms = c.step_ms - storage * (1 - bw / best->bytes_per_s);
      m.inputs_from = "probe:storage";
      m.inputs.push_back({"probe_queue_depth", best->queue_depth, ""});
      const std::string qd_s = strf("%.0f", best->queue_depth);
      m.loader_knob = "--loader-queue-depth=" + qd_s + " (or --set loader.queue_depth=" + qd_s + ")";
      m.settings = loader_settings(c, {{"queue_depth", qd_s}});
      m.inputs.push_back({"probe_bandwidth", best->bytes_per_s, "B/s"});
      m.model = "step - storage_stall * (1 - run_bandwidth / probe_bandwidth)";
    } else {
      m.predicted_step_ms = c.step_ms - storage;
      m.bound = true;
      m.inputs_from = "assumed";
      m.model = "bound: step - storage_stall (no storage probe at a deeper queue)";
    }
    m.evidence =
        strf("storage stalls %.2f ms per step with %.1f reads in flight on average", storage, qd);
    return m;
  }

 private:
  static const StorageProbePoint* best_deeper(const Probes& p, double qd) {
    const StorageProbePoint* best = nullptr;
    for (const auto& pt : p.storage)
      if (pt.queue_depth > qd && (!best || pt.bytes_per_s > best->bytes_per_s)) best = &pt;
    return best;
  }
};

}  // namespace

const RemedyRule& raise_queue_depth_rule() {
  static const RaiseQueueDepth rule;
  return rule;
}

}  // namespace stallscope::analyzer
