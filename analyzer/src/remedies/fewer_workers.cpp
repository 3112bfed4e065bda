// Fewer DataLoader workers, or workers kept off the trainer's core: the
// input keeps up with margin, yet the rank's processes fill its CPUs and the
// trainer is off CPU outside its data waits — waiting for a CPU its loader's
// workers hold (more workers than the CPUs leave beside the trainer can all
// run at once). Workers that only need to keep up make the same batches
// with fewer of them running at a time.
#include <algorithm>
#include <cmath>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// Little's law with slack: workers = ceil(1.25 x fetch per batch / the
// trainer's time per batch), so a slower batch now and then stays hidden.
constexpr double kSlack = 1.25;

class FewerWorkers final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kFewerWorkers; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const DataLoaderReport* l = fed_loader(c.r);
    const CpuBudget& cpu = c.r.cpu;
    if (l == nullptr || l->num_workers < 2 || !cpu.known || cpu.budget_cores <= 0) return std::nullopt;
    const double blocked = c.ms(Part::kHostBlocked);
    // The trainer waits for a CPU only where the rank fills its CPUs, and
    // its workers can take them all at once (as many as the CPUs).
    const bool full = cpu.idle_in_steps >= 0 ? cpu.idle_in_steps < 0.5
                                             : cpu.used_cores >= 0.9 * cpu.budget_cores;
    if (blocked < 0.1 * c.step_ms || !full || double(l->num_workers) < cpu.budget_cores)
      return std::nullopt;
    if (c.data_ms() >= 0.05 * c.step_ms || l->fetch_ms <= 0 || l->consume_ms <= 0)
      return std::nullopt;  // the input does not keep up with margin: not its number
    const int n = int(l->num_workers);
    const int needed = std::max(1, int(std::ceil(kSlack * l->fetch_ms / l->consume_ms - 1e-9)));
    const int beside = std::max(1, int(std::floor(cpu.budget_cores + 1e-9)) - 1);  // CPUs beside the trainer's
    if (needed >= n)
      return reject(RemedyId::kFewerWorkers, "fewer workers",
                    strf("the trainer is off CPU %.2f ms per step outside its waits with the CPUs "
                         "full, but all %d workers are needed: %.2f x fetch %.2f ms / trainer %.2f ms "
                         "per batch = %d",
                         blocked, n, kSlack, l->fetch_ms, l->consume_ms, needed));
    const std::string v = std::to_string(needed);
    Remedy m = make_remedy(c, RemedyId::kFewerWorkers, "Fewer DataLoader workers (the trainer waits for a CPU)",
                           "none", dataloader_knob(*l, {{"num_workers", v}}));
    m.pytorch_knob += "; or keep the workers off the trainer's core: os.sched_setaffinity(0, "
                      "<the other CPUs>) in worker_init_fn";
    m.settings = dataloader_settings(c, *l, {{"num_workers", v}});
    // With no more workers than the CPUs beside the trainer's, it always
    // finds one; otherwise its wait shrinks with the workers that run at once.
    const double kept = needed <= beside ? 0 : double(needed) / n;
    m.predicted_step_ms = c.step_ms - blocked * (1 - kept);
    m.bound = true;
    m.model = "bound: workers = ceil(1.25 x fetch_per_batch / trainer_per_batch); step - "
              "host_blocked x (1 if workers <= cpu_budget - 1 else 1 - workers / num_workers)";
    m.evidence = strf("the trainer is off CPU %.2f ms per step outside its data waits while the "
                      "rank's processes fill its CPUs (%s); the data waits are %.2f ms per step: "
                      "%d workers fetch a batch in %.2f ms against the trainer's %.2f ms, so %d "
                      "keep up with 25 %% slack",
                      blocked, cpu_whose(cpu).c_str(), c.data_ms(), n, l->fetch_ms, l->consume_ms,
                      needed);
    m.inputs = {{"num_workers", double(n), ""},
                {"suggested_workers", double(needed), ""},
                {"fetch_ms_per_batch", l->fetch_ms, "ms"},
                {"trainer_ms_per_batch", l->consume_ms, "ms"},
                {"host_blocked_ms", blocked, "ms"},
                {"budget_cores", cpu.budget_cores, ""},
                {"idle_cpus_in_steps", cpu.idle_in_steps, ""}};
    return m;
  }
};

}  // namespace

const RemedyRule& fewer_workers_rule() {
  static const FewerWorkers rule;
  return rule;
}

}  // namespace stallscope::analyzer
