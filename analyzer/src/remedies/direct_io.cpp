// O_DIRECT for large sequential reads that miss the page cache: the data is
// read once, so the page-cache copy and its memory pressure are waste.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

constexpr double kMinReadBytes = 1 << 20;
constexpr double kCopyShare = 0.2;  // assumed: the page-cache copy's share of read time, at best

class DirectIo final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kDirectIo; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double storage = c.ms(Part::kDataStorage);
    const double mean_read = c.figure(StageKind::kStorage, Fig::kMeanReadBytes).value_or(0);
    if (storage < 0.1 * c.step_ms || mean_read < kMinReadBytes) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kDirectIo, "Read with O_DIRECT (large sequential reads)",
                           "--loader-direct=on", "no DataLoader knob: open files with O_DIRECT in the Dataset");
    m.predicted_step_ms = c.step_ms - kCopyShare * storage;
    m.bound = true;
    m.inputs_from = "assumed";
    m.model = "bound: step - 0.2 * storage_stall (page-cache copy share, assumed)";
    m.evidence = strf("reads average %.1f MiB and storage stalls %.2f ms per step",
                      mean_read / (1 << 20), storage);
    m.inputs = {{"mean_read_bytes", mean_read, "B"}, {"storage_stall_ms", storage, "ms"},
                {"copy_share", kCopyShare, ""}};
    return m;
  }
};

}  // namespace

const RemedyRule& direct_io_rule() {
  static const DirectIo rule;
  return rule;
}

}  // namespace stallscope::analyzer
