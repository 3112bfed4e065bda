// Keep the DataLoader's workers between epochs: without persistent_workers
// every epoch starts its worker processes again (fork or spawn, the dataset
// copied or pickled into each, worker_init_fn, the first fetch) while the
// trainer waits. With persistent workers an epoch after the first still
// waits for one batch's fetch, nothing more.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// The recorded steps from the first one's start to the last one's end (ms).
double run_ms(const RankReport& r) {
  if (r.steps.size() == 0) return 0;
  return double(r.steps.peek(r.steps.size() - 1).end_ns - r.steps.peek(0).start_ns) / 1e6;
}

std::string startups_text(const DataLoaderReport& l) {
  std::string s;
  int n = 0;
  for (const auto& e : l.epochs) {
    if (!e.workers_started || e.startup_ms < 0) continue;
    if (++n > 6) return s + ", …";
    s += strf(n == 1 ? "%.1f ms" : ", %.1f ms", e.startup_ms);
  }
  return s;
}

class PersistentWorkers final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kPersistentWorkers; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const DataLoaderReport* l = fed_loader(c.r);
    if (l == nullptr || l->num_workers == 0 || l->persistent_workers || c.r.steady_steps == 0)
      return std::nullopt;
    const EpochStarts e = epoch_starts(*l);
    const double run = run_ms(c.r);
    if (e.restarts == 0 || run <= 0) return std::nullopt;
    constexpr const char* kTitle = "persistent workers";
    if (e.startup_ms < 0.1 * run)
      return reject(RemedyId::kPersistentWorkers, kTitle,
                    strf("the workers started %d time(s) after the first epoch, but their "
                         "start-ups (%s) are %.1f %% of the run's %.0f ms, under 10 %%",
                         e.restarts, startups_text(*l).c_str(), 100.0 * e.startup_ms / run, run));
    // Each restarted epoch keeps one batch's fetch of its wait.
    const double fetch = std::max(l->fetch_ms, 0.0);
    const double saved = std::max(0.0, e.restart_wait_ms - e.restarts * fetch);
    const double per_step = saved / double(c.r.steady_steps);
    if (per_step <= 0)
      return reject(RemedyId::kPersistentWorkers, kTitle,
                    strf("the trainer's waits for each restarted epoch's first batch (%.1f ms in "
                         "all) are no longer than a batch's fetch (%.2f ms): nothing to save",
                         e.restart_wait_ms, fetch));
    Remedy m = make_remedy(c, RemedyId::kPersistentWorkers, "Keep DataLoader workers between epochs",
                           "none", dataloader_knob(*l, {{"persistent_workers", "True"}}));
    m.settings = dataloader_settings(c, *l, {{"persistent_workers", "True"}});
    m.predicted_step_ms = c.step_ms - per_step;
    m.model =
        "step - sum over the epochs after the first that started new workers of max(0, the "
        "trainer's first wait in steps - fetch_per_batch) / steady steps";
    m.evidence = strf(
        "the DataLoader%s%s (persistent_workers off, num_workers=%u) started its "
        "workers %d time(s) after the first epoch; start-ups %s, %.0f %% of the "
        "run's %.0f ms; the trainer waited %.1f ms per restart for its first batch, "
        "a batch's fetch takes %.2f ms",
        l->site.empty() ? "" : " at ", l->site.c_str(), l->num_workers, e.restarts,
        startups_text(*l).c_str(), 100.0 * e.startup_ms / run, run, e.restart_wait_ms / e.restarts,
        fetch);
    m.inputs = {{"restarts", double(e.restarts), ""},
                {"startup_ms", e.startup_ms, "ms"},
                {"restart_wait_ms", e.restart_wait_ms, "ms"},
                {"fetch_ms_per_batch", fetch, "ms"},
                {"run_ms", run, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& persistent_workers_rule() {
  static const PersistentWorkers rule;
  return rule;
}

}  // namespace stallscope::analyzer
