// Pack many small files into shards: per-file open and small-read cost
// dominates when most reads are small and spread over many files.
#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class PackShards final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kPackShards; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double storage = c.ms(Part::kDataStorage);
    uint64_t reads = 0, small = 0;
    for (const auto& t : c.s.tiers) {
      reads += t.reads;
      small += t.small_reads;
    }
    const double files = double(c.s.files.size());
    if (storage < 0.1 * c.step_ms || reads == 0 || small * 2 < reads || files < 100) return std::nullopt;
    Remedy m = make_remedy(c, RemedyId::kPackShards, "Pack small files into shards",
                           "a sharded dataset (one file per shard, --loader-read-size >= 1 MiB)",
                           "WebDataset / tar shards, or a Dataset over packed files");
    m.predicted_step_ms = c.step_ms - storage;
    m.bound = true;
    m.inputs_from = "assumed";
    m.model = "bound: step - storage_stall (sharded reads' rate not probed)";
    m.evidence = strf("%.0f %% of %llu reads are under 256 KiB, over %.0f files",
                      100.0 * double(small) / double(reads), static_cast<unsigned long long>(reads), files);
    m.inputs = {{"small_read_share", double(small) / double(reads), ""}, {"files", files, ""},
                {"storage_stall_ms", storage, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& pack_shards_rule() {
  static const PackShards rule;
  return rule;
}

}  // namespace stallscope::analyzer
