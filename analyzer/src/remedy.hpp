// The remedy catalog: one rule per file (src/remedies/), each implementing
// RemedyRule, all listed in remedy_table.cpp. A rule looks at the report and
// the run's totals and, when its evidence holds, proposes a Remedy with a
// predicted step time, the model and the inputs it used. Where its evidence
// partly held (its subject is there: a DataLoader, data stalls, pageable
// copies) but a condition failed, it returns reject(...): "considered, not
// proposed" with the reason, shown beside the remedies. docs/remedies.md
// describes every rule.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capacity.hpp"
#include "run_stats.hpp"

namespace stallscope::analyzer {

struct RemedyContext {
  const RankReport& r;
  const RunStats& s;
  const Probes& p;
  double step_ms = 0;  // mean steady step
  std::span<const ProcessDesc> procs = {};  // the rank's processes (empty: not known)
  TraceOrigin origin = TraceOrigin::kRecorder;
  // A profiler trace's DataLoader ran without workers (ImportFacts).
  bool single_process_loader = false;
  double ms(Part part) const { return mean_part_ms(r, part); }
  double share(Part part) const { return r.parts[idx(part)].share; }
  double data_ms() const {
    double v = 0;
    for (size_t i = 0; i < kPartCount; ++i)
      if (is_data(Part(i))) v += ms(Part(i));
    return v;
  }
  // The data stall a producer's lateness may explain: all but the hand-off
  // of batches that were already made.
  double fetch_stall_ms() const { return data_ms() - ms(Part::kDataHandoff); }
  const Stage* stage(StageKind k) const { return find_stage(r, k); }
  // A figure of a measured stage; nothing when the run did not measure it.
  // A rule that needs one abstains, or gives its prediction as a bound,
  // without it: never reads "missing" as "fine".
  std::optional<double> figure(StageKind k, Fig f) const {
    const Stage* st = stage(k);
    return st != nullptr ? st->figure(f) : std::nullopt;
  }
  bool measured(StageKind k) const {
    const Stage* st = stage(k);
    return st != nullptr && st->measured;
  }
};

class RemedyRule {
 public:
  virtual ~RemedyRule() = default;
  virtual RemedyId id() const = 0;
  // A remedy when the evidence holds; reject(...) when it partly held; else
  // nothing (its subject is absent).
  virtual std::optional<Remedy> evaluate(const RemedyContext& c) const = 0;
};

// Every rule, in catalog order (remedy_table.cpp).
std::span<const RemedyRule* const> remedy_table();

// A remedy with the common fields filled; predicted_step_ms = c.step_ms.
Remedy make_remedy(const RemedyContext& c, RemedyId id, std::string title,
                   std::string loader_knob, std::string pytorch_knob);
// "Considered, not proposed": a Remedy carrying only its id, title and the
// reason (Remedy::rejected), which propose_remedies sets aside.
Remedy reject(RemedyId id, std::string title, std::string reason);
// printf into a std::string (evidence and model texts).
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Runs every rule, in the report's order (order_remedies: a healthy verdict
// leads, then the best predicted gain, a bound's weighed down).
// The rules' rejections go to `rejected` (catalog order; none for an id
// proposed) when given.
std::vector<Remedy> propose_remedies(const RemedyContext& c, size_t max,
                                     std::vector<RejectedRemedy>* rejected = nullptr);
// Whose CPU it was, in words: "this rank's processes used 1.9 of its
// 2.0-core budget, 0.0 CPUs of its affinity set were idle during stalls (…)".
std::string cpu_whose(const CpuBudget& cpu);
// After every rank was analysed: each rank's CpuBudget::other_ranks_cores
// from the node's other ranks (when all of them are in `rep`), and the
// whose-CPU words in its remedies' evidence and rejections' reasons split
// into the other ranks' part and other programs'.
void attribute_node_cpu(Report& rep);
// A bound's weight in the report's order: a bound is the gain at best (an
// input was not measured, e.g. pack_shards' sharded read rate), so one
// within about a tenth of a prediction from measured inputs comes after it
// (the measured one is the likelier gain, and usually a setting to type).
inline constexpr double kBoundOrderWeight = 0.9;
// The gain a remedy is ordered by: gain_ms(), a positive bound's × kBoundOrderWeight.
double order_gain_ms(const Remedy& m);
// The report's order: "healthy" first, then the largest order_gain_ms()
// (stable: equal keys keep the catalog's order).
void order_remedies(std::vector<Remedy>& v);
// collectives_below_link's bound: the exposed transfer shrinks as the bus
// bandwidth rises to what NCCL attains of the link (ms, B/s).
double below_link_predicted_ms(double step_ms, double transfer_ms, double bus_bw, double link_bw);

// DataLoader settings (issue #23). A remedy for a run whose hooks recorded
// the loader that fed the optimizer (fed_loader) names the setting, its
// value, the construction site and the command that tries it.
struct LoaderSetting {
  std::string field, value;  // "num_workers", "2"
};
// "DataLoader(num_workers=2) at train.py:42".
std::string dataloader_knob(const DataLoaderReport& l, const std::vector<LoaderSetting>& s);
// The settings that try `s` on `l`: "dataloader[train.py:42].num_workers=2"
// (the selector that picks `l` alone; none when no selector does).
std::vector<Setting> dataloader_settings(const RemedyContext& c, const DataLoaderReport& l,
                                         const std::vector<LoaderSetting>& s);
// The same for stallscope's own loader (and the sample trainer), which take
// `loader.FIELD=VALUE` settings; none for a run without the loader's
// configuration (not stallscope's loader).
std::vector<Setting> loader_settings(const RemedyContext& c, const std::vector<LoaderSetting>& s);
// Workers the loader needs: ceil(fetch per batch / the trainer's time per
// batch outside its waits), at most num_workers + idle CPUs during stalls
// (half a CPU counts; no more than the rank's budget leaves where it is
// less than the affinity set). Nothing when no more workers than today.
struct WorkersPlan {
  int current = 0, needed = 0, proposed = 0;
  double fetch_ms = 0, consume_ms = 0, idle = -1;
  bool capped = false;             // fewer than needed: the idle CPUs limit
  // step - stall × (1 - the waits' worker-busy share) + max(0, fetch / proposed - consume) per
  // batch, and no less than the CPU floor
  double predicted_step_ms = 0;
  // the rank's CPU time per step over min(budget, proposed + 1) cores (0 unknown)
  double cpu_floor_ms = 0;
  // Workers that mostly wait on storage (mostly_in_storage): the CPUs one
  // busy worker uses (its on-CPU share of its fetch time, at least the
  // part not in reads), the CPUs the workers may use (what the fetching
  // workers use now + the idle CPUs) and what the proposed ones need.
  bool storage_bound = false;
  double storage_share = -1, cpu_per_worker = 1, usable_cpus = -1, cpu_needed = -1;
};
// Workers or producers whose storage reads take over half their busy time
// mostly wait: more of them than cores can help, as long as the CPU they
// do use fits.
inline bool mostly_in_storage(double storage_ms, double busy_ms) {
  return busy_ms > 0 && storage_ms > 0.5 * busy_ms;
}
std::optional<WorkersPlan> dataloader_workers(const RemedyContext& c, const DataLoaderReport& l);
// Guard rails before more DataLoader workers (worker_guards.cpp): free
// shared memory against the batches in flight ((workers × prefetch_factor
// + the 2 the trainer holds) × the batch's bytes in whole pages),
// RLIMIT_NOFILE against a worker's descriptors when it runs ahead of the
// trainer (file_descriptor sharing strategy: (2 × prefetch_factor + 1) ×
// tensors per batch + what it inherits) and the trainer's per worker, and
// thread pools in the workers (the threads a worker started beyond its
// queue's two, or torch's count there; a pool of more than one: workers ×
// pool against the rank's CPU budget). `most`: the most workers all
// rails allow (kNoLimit when none limits or none is known); `why` names the
// tightest rail with its numbers, `fix` how to lift it.
struct WorkerGuard {
  static constexpr int kNoLimit = 1 << 20;
  int most = kNoLimit;
  std::string rail;  // "shared memory", "descriptors", "threads"; "" none limits
  std::string why, fix;
  std::vector<Number> inputs;  // every rail's facts that were known
};
WorkerGuard worker_guard(const RemedyContext& c, const DataLoaderReport& l, int proposed);
// The plan with `n` workers instead (fewer than planned: a guard rail):
// the same prediction (dataloader_workers) at n.
WorkersPlan workers_at(const RemedyContext& c, const DataLoaderReport& l, WorkersPlan p, int n);
// Of the loader's waits, the share spent in its fetches (storage,
// preprocessing, collate, waiting for a worker to start or take it); 0 with
// no waits split.
double fetch_share(const DataLoaderReport& l);
// The same share among the waits outside the hand-off (data.handoff), which
// the parts already leave out of the fetch stall: the producers' part of
// prefetch_plan's stalls (1 with nothing split).
double producer_share(const DataLoaderReport& l);
// More producers for a feed behind channels or relays (FeedReport): the
// more_workers remedy, or nothing when they keep up or cannot be added.
std::optional<Remedy> producer_workers(const RemedyContext& c);
// Of its waits outside the hand-off (the preprocessing part's), the share
// in its transforms: preprocessing and collate.
double transform_share(const DataLoaderReport& l);
// Epochs after a loader's first, in start order: the trainer's waits for
// their first batches inside steps (ms, summed), and of them the epochs
// that started new workers (persistent_workers off) with their start-ups.
// Neither deeper prefetch nor more workers shortens such a wait: the
// workers get their first indices only when the epoch's iterator exists.
struct EpochStarts {
  int later = 0;              // epochs after the first with a measured first wait
  double later_wait_ms = 0;   // their first waits inside steps
  int restarts = 0;           // of them, epochs that started new workers
  double restart_wait_ms = 0; // their first waits inside steps
  double startup_ms = 0;      // start-ups of every epoch that started workers, the first included
};
EpochStarts epoch_starts(const DataLoaderReport& l);

// Deeper prefetch: how many more batches the queue must hold to absorb the
// run's bursts. Over the steady steps in order, a step's data stall is
// stall × capacity batches short; while the trainer works, producers of that capacity gain
// consume × capacity - 1 batches. The deficit carried from step to step
// (never below 0) peaks at the batches a queue would have to hold:
// extra_batches = ceil(peak), at least 1, at most kMaxExtraPrefetch.
inline constexpr int kMaxExtraPrefetch = 64;
struct PrefetchPlan {
  double capacity_per_s = 0;  // the slowest input stage's batches per second
  double peak_batches = 0;
  int extra_batches = 0;
  bool capped = false;        // the peak asked for more than kMaxExtraPrefetch
  int steady_steps = 0, stalled_steps = 0;  // stalled: data stall > 5 % of the mean step
  double burst_ms = 0;        // the longest run of stalled steps: its stall, ms
  int burst_steps = 0;        // and its steps
};
// `producer_share`: the part of each stall the producers' lateness explains
// (a DataLoader's fetch_share; 1 for stallscope's loader).
std::optional<PrefetchPlan> prefetch_plan(const RemedyContext& c, double capacity_per_s,
                                          double producer_share = 1);

// "; top: cudaLaunchKernel 1.20 ms, aten::add 0.80 ms" — the largest
// activities of one or two gap classes (report.hpp HostGapReport), "" none.
std::string gap_top_text(const GapClassStat& a, const GapClassStat* b = nullptr);
inline std::string gap_top_text(const GapClassStat& a, const GapClassStat& b) {
  return gap_top_text(a, &b);
}

// One rule object per file: declared here, defined in src/remedies/<id>.cpp.
#define STALLSCOPE_REMEDY(fn) const RemedyRule& fn()
STALLSCOPE_REMEDY(raise_prefetch_rule);
STALLSCOPE_REMEDY(raise_queue_depth_rule);
STALLSCOPE_REMEDY(direct_io_rule);
STALLSCOPE_REMEDY(local_copy_rule);
STALLSCOPE_REMEDY(pack_shards_rule);
STALLSCOPE_REMEDY(more_workers_rule);
STALLSCOPE_REMEDY(cache_decoded_rule);
STALLSCOPE_REMEDY(pinned_memory_rule);
STALLSCOPE_REMEDY(overlap_copies_rule);
STALLSCOPE_REMEDY(h2d_below_link_rule);
STALLSCOPE_REMEDY(overlap_comm_rule);
STALLSCOPE_REMEDY(collectives_below_link_rule);
STALLSCOPE_REMEDY(numa_workers_rule);
STALLSCOPE_REMEDY(avoid_sync_rule);
STALLSCOPE_REMEDY(cuda_graphs_rule);
STALLSCOPE_REMEDY(fused_optimizer_rule);
STALLSCOPE_REMEDY(logging_off_step_rule);
STALLSCOPE_REMEDY(larger_batch_rule);
STALLSCOPE_REMEDY(tune_dataloader_rule);
STALLSCOPE_REMEDY(persistent_workers_rule);
STALLSCOPE_REMEDY(slow_samples_rule);
STALLSCOPE_REMEDY(fewer_workers_rule);
STALLSCOPE_REMEDY(sharing_strategy_rule);
STALLSCOPE_REMEDY(healthy_rule);
#undef STALLSCOPE_REMEDY

}  // namespace stallscope::analyzer
