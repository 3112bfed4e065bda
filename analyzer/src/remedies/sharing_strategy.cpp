// Pass a DataLoader's batches by shared-memory name, not by descriptor:
// under torch's default `file_descriptor` strategy on Linux every tensor of
// a batch a worker puts travels as a descriptor, which the trainer fetches
// from the worker's resource-sharer thread over a socket connection of its
// own, one tensor at a time, before the batch is usable. Under
// `file_system` the trainer opens each tensor's segment by name. The time
// from the worker's put to the trainer's receive is the hand-off part
// (data.handoff); the batches were ready, so neither more workers nor a
// deeper queue shortens it.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

constexpr const char* kTitle = "file_system sharing strategy";
constexpr const char* kKnob = "torch.multiprocessing.set_sharing_strategy('file_system')";

class SharingStrategy final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kSharingStrategy; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const DataLoaderReport* l = fed_loader(c.r);
    if (l == nullptr || l->num_workers == 0 || c.r.steady_steps == 0) return std::nullopt;
    const double handoff = c.ms(Part::kDataHandoff);
    if (handoff < 0.1 * c.step_ms) return std::nullopt;
    const double tensors = l->batch_tensors;
    if (l->sharing_strategy == "file_system")
      return reject(RemedyId::kSharingStrategy, kTitle,
                    strf("the hand-off (%.2f ms per step) already uses the file_system strategy: "
                         "what is left is moving and unpickling the batch%s",
                         handoff,
                         tensors > 0 ? strf(" (%.0f tensors: fewer, larger ones, stacked in "
                                            "collate_fn, pass faster)", tensors).c_str()
                                     : ""));
    if (tensors >= 0 && tensors < 2)
      return reject(RemedyId::kSharingStrategy, kTitle,
                    strf("the hand-off takes %.2f ms per step, but a batch holds %.0f tensor(s): "
                         "it is the batch's bytes and pickle, not descriptors per tensor",
                         handoff, tensors));
    const std::string site = l->site.empty() ? "" : " at " + l->site;
    Remedy m = make_remedy(c, RemedyId::kSharingStrategy, "Pass batches by shared-memory name", "none",
                           std::string(kKnob) + " before the DataLoader" + site +
                               " starts its workers, and in worker_init_fn with spawn or "
                               "forkserver workers");
    m.settings = dataloader_settings(c, *l, {{"sharing_strategy", "file_system"}});
    // At best the whole hand-off goes: what remains (the batch's pickle and
    // the queue's pipe) was not measured apart from the descriptors. The
    // workers still take their fetch time per batch between them.
    const double produce = l->fetch_ms > 0 ? l->fetch_ms / double(l->num_workers) : 0;
    m.predicted_step_ms = std::max(c.step_ms - handoff, produce);
    if (m.predicted_step_ms >= 0.95 * c.step_ms)
      return reject(RemedyId::kSharingStrategy, kTitle,
                    strf("the hand-off takes %.2f ms per step, but the %u worker(s) take %.2f ms "
                         "per batch between them (fetch %.2f ms each): a faster hand-off "
                         "leaves the step where it is",
                         handoff, l->num_workers, produce, l->fetch_ms));
    m.bound = true;
    m.model = "max(step - hand-off (a ready batch's put to its receive, per step), fetch per "
              "batch / num_workers): at best, since the unpickling that stays was not measured "
              "apart from the descriptors";
    m.evidence = strf(
        "the trainer waits %.2f ms per step (%.0f %% of the step) for batches already put by "
        "the workers (mean put to receive %.2f ms per batch)%s, under the %s strategy",
        handoff, 100 * handoff / c.step_ms, l->handoff_ms,
        tensors > 0 ? strf(", %.0f tensors per batch, each its own descriptor", tensors).c_str() : "",
        l->sharing_strategy.empty() ? "default (file_descriptor on Linux)"
                                    : l->sharing_strategy.c_str());
    m.evidence += "; file_system names a /dev/shm segment per tensor, which a killed job can "
                  "leave behind";
    m.inputs = {{"handoff_ms_per_step", handoff, "ms"},
                {"handoff_ms_per_batch", l->handoff_ms, "ms"},
                {"workers_ms_per_batch", produce, "ms"}};
    if (tensors > 0) m.inputs.push_back({"tensors_per_batch", tensors, ""});
    return m;
  }
};

}  // namespace

const RemedyRule& sharing_strategy_rule() {
  static const SharingStrategy rule;
  return rule;
}

}  // namespace stallscope::analyzer
