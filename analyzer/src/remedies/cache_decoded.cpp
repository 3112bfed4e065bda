// Cache decoded samples or move augmentation to the GPU: preprocessing
// stalls the trainer and no usable CPU is left for more workers.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

class CacheDecoded final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kCacheDecoded; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double pre = c.ms(Part::kDataPreprocess);
    const auto& cpu = c.r.cpu;
    // When the rank's own processes fill its CPUs, its trainer also waits
    // for a CPU its workers hold: off-CPU outside its data waits (host
    // blocked). Decoding removed gives that back too, in the share of the
    // rank's CPU its loading took (all but the trainer's own, which with no
    // device is the compute part). With that, the decode's cost to the step
    // is what must reach 10 %: workers that keep the queue nearly full on
    // saturated CPUs stall the trainer little but slow it all the same.
    const double blocked = c.ms(Part::kHostBlocked);
    const bool own = cpu.known && cpu.budget_cores > 0 && cpu.used_cores >= 0.9 * cpu.budget_cores &&
                     (cpu.idle_during_stalls < 0 || cpu.idle_during_stalls < 1);
    double contention = 0;
    if (own && blocked > 0 && pre > 0) {
      const double trainer = c.r.compute_basis == "cpu_only" ? c.ms(Part::kCompute) / c.step_ms : 0;
      contention = blocked * std::clamp(1 - trainer / cpu.used_cores, 0.0, 1.0);
    }
    if (pre <= 0 || pre + contention < 0.1 * c.step_ms) return std::nullopt;
    // A DataLoader's preprocessing part also holds the waits for a worker
    // to start or take the batch: caching samples speeds only the
    // transforms. Nor when the CPUs leave room for the workers it needs (more_workers):
    // the CPU is not what runs out.
    constexpr const char* kTitle = "cache decoded samples";
    if (const DataLoaderReport* l = fed_loader(c.r); l != nullptr) {
      if (transform_share(*l) < 0.5)
        return reject(RemedyId::kCacheDecoded, kTitle,
                      strf("the DataLoader's transforms (preprocessing and collate) are %.0f %% of "
                           "its waits outside the hand-off; the rest (waiting for a worker to "
                           "start or take the batch, unsplit waits) caching does not shorten",
                           100 * transform_share(*l)));
      if (const auto plan = dataloader_workers(c, *l))
        return reject(RemedyId::kCacheDecoded, kTitle,
                      strf("the CPUs leave room for the %d worker(s) the DataLoader needs (%.1f "
                           "idle during stalls): the CPU is not what runs out",
                           plan->proposed, plan->idle));
    }
    const bool saturated =
        cpu.known && (cpu.idle_during_stalls >= 0 ? cpu.idle_during_stalls < 1
                                                  : cpu.used_cores >= 0.9 * cpu.budget_cores);
    if (!saturated && cpu.throttled_periods <= 0) {
      if (!cpu.known) return std::nullopt;
      return reject(RemedyId::kCacheDecoded, kTitle,
                    "the CPUs did not run out: " + cpu_whose(cpu) + " (more workers use them)");
    }
    Remedy m = make_remedy(
        c, RemedyId::kCacheDecoded, "Cache decoded samples or augment on the GPU",
        "cache decoded samples (loader dataset cache) or lighten the transform",
        "cache decoded tensors; GPU augmentation (DALI, torchvision.transforms.v2 on cuda)");
    // A DataLoader the hooks recorded: the dataset whose items to cache and
    // the loader's line.
    if (const DataLoaderReport* l = fed_loader(c.r); l != nullptr && !l->dataset.empty()) {
      m.loader_knob = "none";
      m.pytorch_knob = "cache " + l->dataset + "'s decoded samples (decode once, save the tensors, load them)";
      if (l->getitem_ms > 0) m.pytorch_knob += strf(": its __getitem__ takes %.2f ms per sample", l->getitem_ms);
      if (!l->site.empty()) m.pytorch_knob += ", for the DataLoader at " + l->site;
      m.pytorch_knob += "; or a lighter transform, or augmentation on the GPU";
    }
    m.predicted_step_ms = c.step_ms - pre - contention;
    m.bound = true;
    m.inputs_from = "assumed";
    m.model = "bound: step - preprocess_stall (decode cost removed entirely) - host_blocked x the "
              "loading's share of the rank's CPU, where the rank's own processes fill its CPUs";
    m.evidence = cpu_whose(cpu) + strf("; preprocessing stalls %.2f ms per step", pre);
    if (contention > 0)
      m.evidence += strf(", and the trainer waits %.2f ms per step for a CPU its loading holds "
                         "(off CPU outside its data waits)", contention);
    m.inputs = {{"used_cores", cpu.used_cores, ""},
                {"budget_cores", cpu.budget_cores, ""},
                {"idle_cpus_during_stalls", cpu.idle_during_stalls, ""},
                {"preprocess_stall_ms", pre, "ms"},
                {"cpu_contention_ms", contention, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& cache_decoded_rule() {
  static const CacheDecoded rule;
  return rule;
}

}  // namespace stallscope::analyzer
