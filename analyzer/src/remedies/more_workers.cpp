// More preprocessing workers — only when usable CPUs sat idle while the
// trainer waited for preprocessed data (otherwise more workers just share
// the same saturated CPUs).
#include <algorithm>
#include <cmath>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// A DataLoader the hooks recorded: as many workers as keep up with the
// trainer (fetch time per batch / the trainer's time per batch), within
// the idle CPUs; with num_workers=0 the first workers take the loading off
// the trainer thread (a bound: the hand-off between processes is a cost
// that run could not measure).
constexpr const char* kTitle = "more workers";

// Why no more DataLoader workers were planned, in words: they keep up on
// average, or the CPUs were busy (whose, from the CPU budget).
std::optional<Remedy> why_no_plan(const RemedyContext& c, const DataLoaderReport& l) {
  const double consume = l.consume_ms > 0 ? l.consume_ms : c.step_ms - c.data_ms();
  if (l.fetch_ms <= 0 || consume <= 0) return std::nullopt;  // not measured: nothing to say
  const int needed = std::max(1, int(std::ceil(l.fetch_ms / consume - 1e-9)));
  if (needed <= int(l.num_workers))
    return reject(RemedyId::kMoreWorkers, kTitle,
                  strf("the %u worker(s) keep up on average: a batch's fetch takes %.2f ms and "
                       "the trainer %.2f ms per batch outside its waits, so %d are enough (the "
                       "stalls come in bursts or at epoch starts)",
                       l.num_workers, l.fetch_ms, consume, needed));
  const CpuBudget& cpu = c.r.cpu;
  std::string busy;
  if (cpu.known && cpu.idle_during_stalls >= 0 && cpu.affinity_cpus > 0)
    busy = strf("%.2f of %.1f CPUs busy during stalls (%d worker(s) would keep up); ",
                std::max(0.0, cpu.affinity_cpus - cpu.idle_during_stalls), cpu.affinity_cpus, needed);
  else
    busy = strf("%d worker(s) would keep up, but no usable CPU is idle; ", needed);
  return reject(RemedyId::kMoreWorkers, kTitle,
                busy + cpu_whose(cpu) + ": more workers would share the same busy CPUs");
}

// A DataLoader the hooks recorded: as many workers as keep up with the
// trainer (fetch time per batch / the trainer's time per batch), within
// the idle CPUs and the guard rails (shared memory, descriptors, threads);
// with num_workers=0 the first workers take the loading off the trainer
// thread (a bound: the hand-off between processes is a cost that run could
// not measure).
std::optional<Remedy> for_dataloader(const RemedyContext& c, const DataLoaderReport& l) {
  if (c.data_ms() < 0.1 * c.step_ms) return std::nullopt;
  if (fetch_share(l) < 0.5)
    return reject(RemedyId::kMoreWorkers, kTitle,
                  strf("%.0f %% of the waits on the DataLoader are outside its fetches (hand-offs, "
                       "head-of-line waits, unsplit): more workers fetch no faster",
                       100 * (1 - fetch_share(l))));
  auto plan = dataloader_workers(c, l);
  if (!plan) return why_no_plan(c, l);
  const WorkerGuard guard = worker_guard(c, l, plan->proposed);
  const int planned = plan->proposed;
  if (guard.most < planned) {
    if (guard.most <= plan->current)
      return reject(RemedyId::kMoreWorkers, kTitle,
                    strf("%d worker(s) would keep up, but ", planned) + guard.why +
                        "; fix: " + guard.fix);
    plan = workers_at(c, l, *plan, guard.most);
  }
  const std::string n = std::to_string(plan->proposed);
  Remedy m = make_remedy(c, RemedyId::kMoreWorkers,
                         l.num_workers == 0 ? "Load batches in DataLoader workers" : "Add DataLoader workers",
                         "none", dataloader_knob(l, {{"num_workers", n}}));
  m.settings = dataloader_settings(c, l, {{"num_workers", n}});
  m.predicted_step_ms = plan->predicted_step_ms;
  m.bound = l.num_workers == 0;
  m.model = "workers = ceil(fetch_per_batch / trainer_per_batch), at most num_workers + idle CPUs "
            "during stalls / cpu_per_worker (1, or for workers over half in storage reads their "
            "on-CPU share of the fetch); step - data_stall * (1 - worker_start_share) + max(0, fetch_per_batch / "
            "workers - trainer_per_batch), at least cpu_used * step / min(cpu_budget, workers + 1)";
  if (m.bound) m.model = "bound: " + m.model + " (moving batches between processes costs what this run did not measure)";
  m.evidence = strf("the DataLoader%s%s (num_workers=%d) fetches a batch in %.2f ms; the trainer "
                    "takes %.2f ms per batch outside its waits, so %d worker(s) keep up",
                    l.site.empty() ? "" : " at ", l.site.c_str(), plan->current, plan->fetch_ms,
                    plan->consume_ms, plan->needed);
  if (plan->idle >= 0) m.evidence += strf("; %.1f CPUs idle during data stalls", plan->idle);
  if (plan->storage_bound)
    m.evidence += strf("; the workers wait on storage %.0f %% of their busy time, so more of them "
                       "than cores can help: %d workers need %.2f CPUs%s",
                       100 * plan->storage_share, plan->proposed, plan->cpu_needed,
                       plan->usable_cpus >= 0 ? strf(" of %.2f usable", plan->usable_cpus).c_str() : "");
  if (plan->proposed < planned)
    m.evidence += strf(" (%d proposed, not %d: ", plan->proposed, planned) + guard.why + "; " +
                  guard.fix + ")";
  else if (plan->capped)
    m.evidence += strf(" (%d proposed: the %s allow no more)", plan->proposed,
                       plan->storage_bound ? "usable CPUs" : "idle CPUs");
  if (plan->cpu_floor_ms > 0 && plan->cpu_floor_ms >= plan->predicted_step_ms - 1e-9)
    m.evidence += strf("; the step's CPU work (%.1f cores used) keeps it at %.2f ms or more",
                       c.r.cpu.used_cores, plan->cpu_floor_ms);
  m.inputs = {{"num_workers", double(plan->current), ""}, {"suggested_workers", double(plan->proposed), ""},
              {"workers_needed", double(plan->needed), ""}, {"fetch_ms_per_batch", plan->fetch_ms, "ms"},
              {"trainer_ms_per_batch", plan->consume_ms, "ms"},
              {"idle_cpus_during_stalls", plan->idle, ""},
              {"cpu_floor_ms", plan->cpu_floor_ms, "ms"},
              {"storage_share_of_fetch", plan->storage_share, ""},
              {"cpus_per_worker", plan->cpu_per_worker, ""}};
  m.inputs.insert(m.inputs.end(), guard.inputs.begin(), guard.inputs.end());
  return m;
}

// How many producers behind a channel or relay (FeedReport) keep up:
// Little's law, busy time per item × items per step over the trainer's own
// time per step; within the idle CPUs unless the producers mostly wait on
// storage (then more of them overlap their reads).
struct ProducerPlan {
  double w = 0;  // producers today (those that made two items or more)
  double per_step = 0, trainer_ms = 0, data = 0, idle = -1;
  int needed = 0, proposed = 0, most_times = 0;
  bool capped = false, limited = false, blocked = false, processes = false;
};

// Little's law lets waits overlap without end; what the producers wait on
// (a service, a disk, a lock none of them shows) and the memory each
// process holds do not. At most this many times today's count: a setting
// to type and measure, a bound on its gain; the next run asks again from
// what it measured.
constexpr int kMostTimesProducers = 4;

std::optional<ProducerPlan> plan_producers(const RemedyContext& c, const FeedReport& f) {
  ProducerPlan q;
  q.data = c.data_ms();
  const Stage* st = c.stage(StageKind::kProducers);
  if (st == nullptr || !st->measured || f.busy_ms_per_item <= 0 || q.data < 0.1 * c.step_ms)
    return std::nullopt;
  // The workers to multiply: a producer that handed on one object only (a
  // pool's task handler posting its stop sentinel to the result thread) is
  // none of them; the busiest says whether they are processes or threads.
  size_t makers = 0;
  const Producer* busiest = &f.producers.front();
  for (const Producer& p : f.producers) {
    makers += p.items >= 2;
    if (p.items > busiest->items) busiest = &p;
  }
  q.processes = busiest->tid == 0;
  q.w = double(makers > 0 ? makers : f.producers.size());
  q.per_step = f.busy_ms_per_item * std::max(f.items_per_step, 1e-9);
  q.trainer_ms = std::max(c.step_ms - q.data, 0.01 * c.step_ms);
  // 5 % slack: a measured ratio of 3.02 asks for 3 workers, not 4.
  q.needed = int(std::ceil(q.per_step / q.trainer_ms - 0.05));
  if (q.needed <= int(q.w)) return std::nullopt;  // they keep up on average: not their number
  // Producers that mostly wait overlap their waits: more of them than
  // cores can help. Storage reads are such waits. Time blocked elsewhere
  // may be time spent waiting for a CPU, which more producers would not
  // shorten: it counts where CPUs sat idle during the stalls, or where it
  // is over 3x the producers' CPU time per item (a thread that needs a CPU
  // that little is not kept off one that long unless the machine is over
  // three times oversubscribed).
  q.idle = c.r.cpu.idle_during_stalls;
  const bool waits_elsewhere = f.other_ms_per_item > 0 &&
                               (q.idle < 0 || q.idle >= 1 || f.other_ms_per_item > 3 * f.cpu_ms_per_item);
  q.blocked = mostly_in_storage(f.storage_ms_per_item, f.busy_ms_per_item) ||
              (waits_elsewhere && mostly_in_storage(f.storage_ms_per_item + f.other_ms_per_item,
                                                    f.busy_ms_per_item));
  q.proposed = q.needed;
  if (!q.blocked && q.idle >= 0) {
    const int most = int(q.w + std::floor(q.idle + 0.5));
    if (most < q.proposed) {
      q.proposed = most;
      q.capped = true;
    }
  }
  if (q.proposed <= int(q.w)) return std::nullopt;
  q.most_times = kMostTimesProducers * int(q.w);
  q.limited = q.proposed > q.most_times;
  if (q.limited) q.proposed = q.most_times;
  return q;
}

std::optional<Remedy> for_producers(const RemedyContext& c, const FeedReport& f) {
  if (!f.found || f.producers.empty() || fed_loader(c.r) != nullptr) return std::nullopt;
  const std::optional<ProducerPlan> plan = plan_producers(c, f);
  if (!plan) return std::nullopt;
  const ProducerPlan& q = *plan;
  const std::string what = q.processes ? "producer processes" : "producer threads";
  Remedy m = make_remedy(
      c, RemedyId::kMoreWorkers, "Add " + what, "none",
      strf("%d %s feeding the trainer (now %.0f)%s", q.proposed, what.c_str(), q.w,
           f.relays.empty() ? "" : strf(": Pool(processes=%d) / ProcessPoolExecutor(max_workers=%d)",
                                        q.proposed, q.proposed).c_str()));
  m.knob_for = "program";
  const double stall = std::max(0.0, q.per_step / q.proposed - q.trainer_ms);
  m.predicted_step_ms = c.step_ms - q.data + std::min(stall, q.data);
  m.bound = q.limited;
  m.model = "workers = ceil(busy_per_item * items_per_step / (step - data_stall)), at most "
            "producers + idle CPUs during stalls unless they mostly wait (in storage reads; "
            "elsewhere with a CPU idle during stalls or over 3x their CPU time), and at most 4x "
            "the producers; step - data_stall + "
            "max(0, busy_per_item * items_per_step / workers - (step - data_stall))";
  if (q.limited) m.model = "bound: " + m.model + " (their waits overlapping as today's do, unmeasured at 4x)";
  m.evidence = strf("%s: %.0f producer(s) each busy %.2f ms per item (on CPU %.2f, in storage "
                    "reads %.2f, blocked elsewhere %.2f), %.2f item(s) per step; the trainer "
                    "works %.2f ms per step outside its waits, so %d keep up",
                    f.path.c_str(), q.w, f.busy_ms_per_item, f.cpu_ms_per_item, f.storage_ms_per_item,
                    f.other_ms_per_item, f.items_per_step, q.trainer_ms, q.needed);
  if (q.idle >= 0) m.evidence += strf("; %.1f CPUs idle during data stalls", q.idle);
  if (q.capped) m.evidence += strf(" (%d proposed: the idle CPUs allow no more)", q.proposed);
  if (q.limited)
    m.evidence += strf(" (Little's law asks for %d; %d proposed, at most %dx the producers: what "
                       "they wait on and their memory limit more; measure, then run again)",
                       q.needed, q.proposed, kMostTimesProducers);
  if (q.blocked) m.evidence += "; they mostly wait (storage, or elsewhere), so more of them than cores can help";
  m.inputs = {{"producers", q.w, ""}, {"suggested_producers", double(q.proposed), ""},
              {"producers_needed", double(q.needed), ""},
              {"busy_ms_per_item", f.busy_ms_per_item, "ms"},
              {"items_per_step", f.items_per_step, ""}, {"trainer_ms_per_step", q.trainer_ms, "ms"},
              {"idle_cpus_during_stalls", q.idle, ""},
              {"most_producers", double(q.most_times), ""}};
  return m;
}

class MoreWorkers final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kMoreWorkers; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    if (const DataLoaderReport* l = fed_loader(c.r)) return for_dataloader(c, *l);
    if (auto m = for_producers(c, c.r.feed)) return m;
    const double pre = c.ms(Part::kDataPreprocess);
    const double workers = c.figure(StageKind::kPreprocess, Fig::kWorkers).value_or(0);
    const double idle = c.r.cpu.idle_during_stalls;
    const double spare = c.r.cpu.known ? c.r.cpu.budget_cores - c.r.cpu.used_cores : 0;
    // Half an idle CPU or more counts as one more worker's worth.
    const double add = std::floor(std::min(idle, spare) + 0.5);
    if (pre < 0.1 * c.step_ms || workers <= 0) return std::nullopt;
    if (add < 1 && c.r.cpu.known)
      return reject(RemedyId::kMoreWorkers, kTitle,
                    strf("preprocessing stalls %.2f ms per step with %.0f workers, but ", pre, workers) +
                        cpu_whose(c.r.cpu) + ": more workers would share the same busy CPUs");
    if (add < 1) return std::nullopt;
    const double w2 = workers + add;
    const std::string n = strf("%.0f", w2);
    Remedy m = make_remedy(c, RemedyId::kMoreWorkers, "Add preprocessing workers",
                           "--loader-workers=" + n + " (or --set loader.workers=" + n + ")",
                           "DataLoader(num_workers=...)");
    m.settings = loader_settings(c, {{"workers", n}});
    m.predicted_step_ms = c.step_ms - pre * (1 - workers / w2);
    m.model = "step - preprocess_stall * (1 - workers / (workers + usable idle CPUs))";
    m.evidence = strf("%.1f CPUs of the rank's budget were idle during data stalls; "
                      "preprocessing stalls %.2f ms per step with %.0f workers", idle, pre, workers);
    m.inputs = {{"workers", workers, ""}, {"suggested_workers", w2, ""},
                {"idle_cpus_during_stalls", idle, ""}, {"spare_cores", spare, ""},
                {"preprocess_stall_ms", pre, "ms"}};
    return m;
  }
};

}  // namespace

std::optional<Remedy> producer_workers(const RemedyContext& c) { return for_producers(c, c.r.feed); }

const RemedyRule& more_workers_rule() {
  static const MoreWorkers rule;
  return rule;
}

}  // namespace stallscope::analyzer
