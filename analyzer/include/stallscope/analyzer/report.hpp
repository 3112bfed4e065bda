// stallscope analyzer — what an analysis produces: per rank, every step with
// its attribution, the summary over steady steps, outliers, the capacity
// model, the root cause and the remedies. Renderers (render.hpp) print it;
// docs/report-schema.md documents its JSON form.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stallscope/analyzer/parts.hpp"
#include "stallscope/analyzer/spill_vector.hpp"

namespace stallscope::analyzer {

inline constexpr int kSchemaVersion = 1;
// Minor version: additive fields (1.1: the cross-rank section;
// 1.2: typed stages (collate, trainer_load; workers and busy time per item),
// the CPU budget's utilization and capacity, no "cpu" stage;
// 1.3: DataLoader blocks (`dataloaders`), `settings`, `phases`, the exact
// split, remedies' `try` command;
// 1.4: `feed` (producers behind channels and relays), the `producers`
// stage, step sources `handoffs`, `inferred`, `whole_trace`;
// 1.5: `host_gaps` (the host parts' device-idle gaps classed, with their
// activities), the step table's `gap_ns`;
// 1.6: a remedy's `knob_for`;
// 1.7: `rejected_remedies` (considered, not proposed, with the reason), the
// DataLoader block's `guard_rails` (shared memory, descriptors, threads),
// its fetch shares and slow samples, the `slow_samples` remedy;
// 1.8: the `data.handoff` part (a ready batch passed between processes),
// the `sharing_strategy` remedy;
// 1.9: `headspace` (stallscope run --headspace: a replayed run, or the
// ceiling another one measured), a remedy's `set` (its --set items);
// 1.10: `step_buckets` (the HTML steps chart's bars and scale), `timelines`.
inline constexpr int kSchemaMinor = 10;


// How the data-stall time of a step was split (bits).
// kSplitExact: from the DataLoader hooks' records (the batch's fetch in its
// worker, its reads and collate, the hand-off): measured, not walked or inferred.
enum SplitBits : uint8_t { kSplitLineage = 1, kSplitInferred = 2, kSplitNone = 4, kSplitExact = 8 };

// Why the device idled in a host gap (docs/report-guide.md "Host gaps"):
// drained after a synchronization, launch-bound, a CPU operator's time,
// data loading on the trainer, or nothing recorded explains it.
enum class GapClass : uint8_t { kSync, kLaunch, kCpuOp, kData, kUntraced, kCount };
inline constexpr size_t kGapClassCount = static_cast<size_t>(GapClass::kCount);
using GapNs = std::array<int64_t, kGapClassCount>;
std::string_view gap_class_key(GapClass c) noexcept;  // "sync", "launch", "cpu_op", "data", "untraced"

struct StepResult {
  uint64_t index = 0;
  int64_t start_ns = 0, end_ns = 0;  // monotonic ns of the rank
  PartNs parts{};                    // sums to end_ns - start_ns exactly
  // The host parts' time by gap class: sums to the host parts exactly with
  // device activity; all zero without (no device-idle gaps).
  GapNs gap_ns{};
  bool warmup = false;
  bool outlier = false;
  bool closed_by_analyzer = false;   // its end event was missing
  uint8_t split = 0;                 // SplitBits
  int64_t wall() const noexcept { return end_ns - start_ns; }
};

struct PartStat {
  int64_t total_ns = 0;  // over steady steps
  double share = 0;      // of the steady steps' wall time, 0..1
  double p50_ms = 0, p90_ms = 0;
};

// One named number shown as evidence or as a model input.
struct Number {
  std::string name;
  double value = 0;
  std::string unit;
};

// The stages of a pipeline feeding a trainer, whoever built it (DESIGN.md
// "Pipelines stallscope did not build"), and the comm stage beside them.
enum class StageKind : uint8_t {
  kStorage,      // reads
  kPreprocess,   // per-sample work (decode, augment)
  kCollate,      // assembling a batch from its samples
  kPinH2D,       // pinning and host-to-device copies
  kTrainerLoad,  // loading done on the trainer thread itself (no workers)
  kComm,         // collectives (not an input stage)
  kProducers,    // threads and processes handing the trainer its input through
                 // channels or relays stallscope did not build (FeedReport)
};
inline constexpr size_t kStageCount = 7;
inline constexpr std::array<StageKind, kStageCount> kStages = {
    StageKind::kStorage, StageKind::kPreprocess, StageKind::kCollate,
    StageKind::kPinH2D,  StageKind::kTrainerLoad, StageKind::kComm,
    StageKind::kProducers};
// "storage", "preprocessing", "collate", "h2d", "trainer_load", "comm",
// "producers".
std::string_view stage_key(StageKind k) noexcept;

// A stage's figures. Each has one name and unit in the reports
// (figure_key, figure_unit): a remedy names them by type, so a misspelt
// one does not compile.
enum class Fig : uint8_t {
  // storage
  kBytesPerBatch, kReadBandwidth, kReads, kMeanReadBytes, kFiles, kReadsWithQueueDepth,
  kCacheMissBytes, kCacheClassifiedBytes, kMeanQueueDepth,
  // preprocessing
  kWorkers, kBusyPerSample, kSamplesPerBatch,
  // DataLoader stages (preprocessing, collate, trainer_load), ms per batch
  kFetchPerBatch, kCollatePerBatch, kHandoffPerBatch,
  // h2d
  kBytesPerStep, kPageableBandwidth, kPinnedBandwidth, kPageableBytes,
  // comm
  kCollectiveKernels, kBusBandwidth, kLargeCollectiveKernels, kLargeBusBandwidth,
  kUnjoinedCollectiveKernels,
  // producers
  kProducers, kRelays, kItemsPerStep, kBytesPerItem, kWaitPerItem,
  kCount,
};
std::string_view figure_key(Fig f) noexcept;   // "bytes_per_batch", …
std::string_view figure_unit(Fig f) noexcept;  // "B", "B/s", "ms", ""

struct Figure {
  Fig id;
  double value = 0;
};

// One stage against the trainer's demand. Not measured: the run holds no
// events of it, and nothing about it is known (not "it keeps up").
struct Stage {
  StageKind kind = StageKind::kStorage;
  bool measured = false;
  double utilization = 0;    // busy / available, 0..1
  double capacity = 0;       // batches (steps) per second the stage can sustain
  double demand = 0;         // batches per second the trainer asks for
  double workers = -1;       // threads or processes doing it (-1 unknown)
  // Busy time per item (sample, read, batch), ms: all of it, and split into
  // on-CPU and blocked where the CPU sampler tells (-1 unknown).
  double busy_per_item_ms = -1, on_cpu_per_item_ms = -1, blocked_per_item_ms = -1;
  std::vector<Figure> figures;

  std::string_view name() const noexcept { return stage_key(kind); }
  double headroom() const noexcept { return demand > 0 ? capacity / demand : 0; }
  // A figure of a measured stage; nothing when the stage was not measured
  // or the run did not give that figure.
  std::optional<double> figure(Fig f) const noexcept {
    if (!measured) return std::nullopt;
    for (const Figure& x : figures)
      if (x.id == f) return x.value;
    return std::nullopt;
  }
};

// The rank's CPUs: a resource the stages (and the trainer) consume.
struct CpuBudget {
  bool known = false;
  double affinity_cpus = 0;
  double quota_cores = 0;      // 0 = no quota
  int ranks_on_node = 1;
  double budget_cores = 0;     // min(affinity, quota) / ranks_on_node
  double used_cores = 0;       // CPU time of all the rank's processes / wall
  // The cores the node's other ranks used (their used_cores summed), where
  // their traces were analysed with this one; -1 unknown.
  double other_ranks_cores = -1;
  double idle_during_stalls = -1;  // mean idle CPUs of the affinity set in stalls (-1 unknown)
  double idle_in_steps = -1;       // the same over whole steps
  double throttled_periods = 0;    // cgroup nr_throttled over the run
  double throttled_ms = 0;
  double utilization = 0;      // used / budget (may exceed 1)
  // Batches per second the CPUs could sustain at the same CPU work per
  // batch (0 unknown); its headroom against `demand`.
  double capacity = 0, demand = 0;
  double headroom() const noexcept { return demand > 0 ? capacity / demand : 0; }
};

// The remedy catalog's entries (remedy_table.cpp), in its order.
enum class RemedyId : uint8_t {
  kRaisePrefetch, kRaiseQueueDepth, kDirectIo, kLocalCopy, kPackShards, kMoreWorkers,
  kCacheDecoded, kPinnedMemory, kH2dBelowLink, kNumaWorkers, kOverlapCopies, kOverlapComm,
  kCollectivesBelowLink, kAvoidSync, kCudaGraphs, kFusedOptimizer, kLoggingOffStep, kLargerBatch,
  kTuneDataloader, kPersistentWorkers, kSlowSamples, kFewerWorkers, kSharingStrategy, kHealthy,
};
inline constexpr size_t kRemedyCount = static_cast<size_t>(RemedyId::kHealthy) + 1;
// What a remedy acts on: the input pipeline (its gain is capped by the
// headspace ceiling), host-to-device copies, the host's own work between
// kernels, communication; a verdict acts on nothing.
enum class RemedyFamily : uint8_t { kInput, kCopy, kHost, kComm, kVerdict };
// The stable id the reports publish: "raise_prefetch".
std::string_view remedy_key(RemedyId id);
RemedyFamily remedy_family(RemedyId id);

// A setting that tries a remedy without editing the program: the item of
// `stallscope run --set TARGET.KEY=VALUE` (docs/attach.md, "Trying a setting").
struct Setting {
  std::string target;  // "loader", "dataloader", "dataloader[train.py:42]"
  std::string key;     // "num_workers"
  std::string value;   // "2", "true", "file_system"
  bool operator==(const Setting&) const = default;
};
// "TARGET.KEY=VALUE".
std::string setting_item(const Setting& s);
// The command that tries `settings` on the traced command line `command`
// ("<your command>" when it is not known), each word shell-quoted where it
// needs it: "stallscope run --set 'dataloader[train.py:42].num_workers=2'
// -- python3 train.py". "" for no settings.
std::string try_command(const std::vector<Setting>& settings, const std::vector<std::string>& command);

struct Remedy {
  RemedyId kind{};            // what the catalog's rule set (make_remedy)
  std::string id;             // remedy_key(kind): "raise_prefetch", …
  std::string title;
  std::string evidence;       // one sentence with the numbers
  std::string model;          // the formula used
  std::string loader_knob;    // stallscope loader knob
  std::string pytorch_knob;   // the usual PyTorch equivalent (or the program's own setting)
  // Whose setting pytorch_knob is: "pytorch" (a DataLoader, torch), or
  // "program" (the traced program's own code: its producer threads or
  // processes, a Pool), shown as "PyTorch:" and "program:".
  std::string knob_for = "pytorch";
  double step_ms = 0;         // current median steady step
  double predicted_step_ms = 0;
  bool bound = false;         // prediction is a bound ("at best"): an input was not measured
  std::string inputs_from;    // "run", "probe:<name>", "topology", "assumed"
  std::vector<Number> inputs;
  // What tries it without editing the program (rendered with the rank's
  // command by try_command()); empty when nothing does.
  std::vector<Setting> settings;
  // Not empty: the rule considered this remedy and did not propose it, for
  // this reason (a sentence with the numbers, and the fix where a guard rail
  // failed). propose_remedies moves such a Remedy to
  // RankReport::rejected_remedies; the other fields are then unused.
  std::string rejected;
  double gain_ms() const noexcept { return step_ms - predicted_step_ms; }
};

// A remedy considered and not proposed: its rule's evidence partly held (the
// subject is there — a DataLoader, pageable copies, data stalls — but a
// condition failed). Rules whose subject is absent list nothing.
struct RejectedRemedy {
  RemedyId kind{};
  std::string id;      // remedy_key(kind): "more_workers"
  std::string title;   // "more workers"
  std::string reason;  // "1.96 of 2.0 usable CPUs busy during stalls: …"
};

// One PyTorch DataLoader of the rank, from the hooks' records (contract of
// issue #23: loader_config, data waits, batch_handoff, the workers' sample
// spans). Times in ms; -1 = not measured.
struct LoaderWorker {
  int32_t worker = -1;  // worker id (-1: the trainer itself, num_workers=0)
  uint32_t pid = 0;
  uint64_t batches = 0;
  double fetch_ms = -1, getitem_ms = -1, collate_ms = -1;  // means: per batch, per sample, per batch
};
struct LoaderEpoch {
  uint32_t generation = 0;
  double startup_ms = -1;        // iterator creation -> first batch received
  bool workers_started = false;  // new worker processes (persistent_workers off, or the first)
  double first_wait_ms = -1;     // the trainer's wait for its first batch, the part inside steps
};
// Where the trainer's waits on this loader went (ms, all waits of the run).
struct LoaderWaitSplit {
  double storage_ms = 0, preprocess_ms = 0, collate_ms = 0;
  double worker_wait_ms = 0;  // before its fetch began, outside the worker's earlier fetches (starting, idle)
  double handoff_ms = 0;      // after the put until received (IPC, unpickling)
  double head_of_line_ms = 0; // ready before asked for, beyond one batch's hand-off (queued behind others)
  double unjoined_ms = 0;     // waits with no worker record to split them
};
// A sample far slower than the loader's median, in a batch the trainer
// waited for (the same dataset index over epochs: one entry).
struct LoaderSlowSample {
  uint64_t index = 0;   // dataset index
  uint64_t times = 0;   // how often it was that slow
  double ms = 0;        // its longest __getitem__
  std::string file;     // the longest read inside it ("" none)
};
struct DataLoaderReport {
  uint64_t id = 0;
  std::string site, dataset, sampler, batch_sampler, collate;
  uint32_t num_workers = 0, prefetch_factor = 0, batch_size = 0;
  uint64_t dataset_len = 0;
  std::string pin_memory;   // "off", "on", "inactive" (asked for, turned off by torch)
  std::string mp_context;   // "fork", "spawn", "forkserver", "unknown"
  std::string dataset_kind; // "map", "iterable", "unknown"
  bool persistent_workers = false, drop_last = false, in_order = true;
  bool getitems = false, overridden = false;
  uint64_t generations = 0;      // iterators created (epochs)
  uint64_t batches = 0;          // received by the trainer
  uint64_t waits = 0, waits_in_steps = 0;
  double wait_ms = 0;            // the trainer's data waits on it, all of them
  bool fed_optimizer = false;    // its waits fall inside steps (the training loader)
  LoaderWaitSplit split;
  // Waits with head-of-line time, or on a late batch while a later one was
  // already put; and how long later batches sat ready during the latter.
  uint64_t head_of_line_waits = 0;
  double head_of_line_ready_ms = 0;
  double fetch_ms = -1, getitem_ms = -1, collate_ms = -1;  // means over the workers
  double handoff_ms = -1;        // mean put -> received of batches put while awaited
  double consume_ms = -1;        // trainer's time per batch outside its waits (in steps)
  uint64_t unjoined_batches = 0; // batches received with no worker fetch found
  bool sample_spans_off = false; // a worker skipped per-sample spans (cheap items)
  // Of the workers' fetch time (all their fetches), the share in storage
  // reads and on CPU (the sampler's process CPU over it; -1 unknown).
  double fetch_storage_share = -1, fetch_cpu_share = -1;
  // The samples of the batches the trainer waited for: how many were
  // timed, their median and 99th percentile; the tail, where a few (at most
  // 5 %) took 5x the median, 1 ms more and a quarter of the slowest: the
  // slowest first, at most 8.
  uint64_t samples_timed = 0;
  double sample_p50_ms = -1, sample_p99_ms = -1;
  uint64_t slow_sample_count = 0;    // samples in the tail (all, not only the 8)
  double slow_sample_excess_ms = 0;  // their time beyond the median, summed
  // The trainer's waits on the batches holding them beyond the median wait,
  // each at most those samples' excess, summed: what they held it up.
  double slow_sample_stall_ms = 0;
  std::vector<LoaderSlowSample> slow_samples;
  std::vector<LoaderWorker> workers;
  std::vector<LoaderEpoch> epochs;
  // Guard-rail facts the hooks recorded (`dataloader env`, `dataloader
  // batch`, `dataloader worker` marks); -1 unknown. Shared memory: /dev/shm
  // free and total bytes, the most free seen at an iterator's creation;
  // descriptors: the trainer's RLIMIT_NOFILE soft limit and its open
  // descriptors then; torch's sharing strategy ("file_descriptor",
  // "file_system", "" unknown); the first batch's tensor bytes and tensors;
  // per worker process the most OS threads (stallscope's own left out) and
  // torch threads seen, and the most threads a worker started after its
  // loop began (its queue's feeder and resource sharer among them).
  double shm_free_bytes = -1, shm_total_bytes = -1;
  double nofile_soft = -1, open_fds = -1;
  std::string sharing_strategy;
  double batch_bytes = -1, batch_tensors = -1;
  double worker_threads = -1, worker_torch_threads = -1, worker_new_threads = -1;
};

// Who feeds a trainer through channels or relays stallscope did not build
// (the preload shim's hand-offs): a multiprocessing queue of forked
// workers, a loader thread behind a pipe or a condition variable, a pool
// whose result thread relays the workers' results.
struct Producer {
  uint32_t pid = 0, tid = 0;  // tid 0: the whole process (a forked worker)
  std::string name;           // thread name, or "process PID"
  uint64_t items = 0;         // objects it handed on (to the trainer or its relay)
  double cpu_ms = -1;         // on CPU over the run, -1 unknown
  double storage_ms = 0;      // in storage reads over the run
  double interval_ms = -1;    // mean time between its items (-1: fewer than 2)
};
struct FeedReport {
  bool found = false;
  std::string path;           // e.g. "2 processes -> multiprocessing queue -> thread 12 -> semaphore -> trainer"
  std::string channel;        // how the trainer gets its objects: "multiprocessing queue", "pipe", …
  std::vector<Producer> producers;
  std::vector<Producer> relays;  // threads between the producers and the trainer
  uint64_t handoffs = 0;      // objects the trainer got
  uint64_t items = 0;         // objects the producers handed on
  double items_per_step = 0;
  double bytes_per_item = 0;
  double wait_ms_per_handoff = 0;  // the trainer's time from asking to getting
  double waited_share = 0;         // hand-offs it waited for (over 50 µs)
  // Per item the producers handed on: on CPU, in storage reads; blocked
  // elsewhere (what the time between a producer's items holds beyond those,
  // counted where the trainer waited for at least 80 % of its objects or a
  // quarter of its time: the producers were busy all along); their sum, -1 where the CPU sampler
  // did not see them. interval: the mean time between a producer's items.
  double cpu_ms_per_item = -1, storage_ms_per_item = 0, other_ms_per_item = 0;
  double busy_ms_per_item = -1, interval_ms_per_item = -1;
};

// What the host did in its device-idle gaps, over the steady steps
// (docs/report-guide.md "Host gaps"). ms are per steady step.
struct GapActivity {
  std::string name;
  std::string kind;   // "annotation", "python", "cpu_op", "api", "sync", "stack_sample"
  double ms = 0;      // exclusive time inside the gaps, per step
};
struct GapClassStat {
  GapClass cls = GapClass::kUntraced;
  double ms = 0;       // per step
  double share = 0;    // of the steady steps' wall time
  uint64_t gaps = 0;   // gaps of this class over the steady steps
  double launch_ms = 0;  // launch calls inside these gaps, per step (not in --json)
  std::vector<GapActivity> top;  // by exclusive time (sync: the calls)
};
struct HostGap {       // one gap, for the list of the run's longest
  uint64_t step = 0;
  double start_ms = 0; // from the step's start
  double ms = 0;
  GapClass cls = GapClass::kUntraced;
  std::string top;     // its top activity ("" none)
  std::string detail;  // a sync: the op or frame that made the call
};
struct HostGapReport {
  bool analyzed = false;  // the rank had device activity: its gaps were classed
  std::string note;       // why not, when not
  double host_ms = 0;     // host parts per step (= the classes' sum)
  std::array<GapClassStat, kGapClassCount> classes{};
  std::vector<GapActivity> top;  // every class together
  std::vector<HostGap> longest;  // the run's longest gaps, longest first
  // Evidence the remedies read (per step): gap time inside optimizer steps
  // (Optimizer.step#…), under logging or metrics calls, and the sync call
  // most gap time followed with what made it.
  double optimizer_ms = 0, logging_ms = 0;
  std::string optimizer, logging, sync_call, sync_made_by;
  double launches = 0;    // launch calls per step inside launch-bound gaps
  double gap_count = 0;   // gaps per step
  const GapClassStat& of(GapClass c) const { return classes[static_cast<size_t>(c)]; }
};

// A `set …` mark (what became of a `stallscope run --set`).
struct SettingMark {
  std::string status;  // applied, adjusted, refused, unmatched, reassigned
  std::string key, value, site, detail;
  std::string text;    // the whole mark
};

// A named phase outside steps (a `phase:eval` range).
struct PhaseStat {
  std::string name;  // "eval"
  uint64_t count = 0;
  double total_ms = 0;
};

struct Drops {
  uint64_t buffer_dropped = 0;
  uint64_t disk_dropped = 0;
  uint64_t ring_discarded = 0;
  size_t files_truncated = 0;
  size_t files_error = 0;
  uint64_t late_events = 0;  // arrived after their step was finalized (ignored)
};

// What the device, the trainer thread and the loader did during one step
// (for the HTML timeline). Intervals are ns relative to the step start.
// One lane per device stream and kind, per trainer activity, and per
// producer thread or worker process and kind.
struct Lane {
  std::string name;  // "GPU 0 stream 7: kernels", "trainer: data wait", "ss-loader-io tid 40: reads"
  // What it shows: "compute", "comm", "h2d", "other", "data wait", "api",
  // "reads", "preprocess".
  std::string kind;
  std::vector<std::pair<int64_t, int64_t>> spans;  // sorted, disjoint
};
struct Timeline {
  std::string why;  // "typical", "longest"
  uint64_t index = 0;
  int64_t wall_ns = 0;
  std::vector<Lane> lanes;
};

// One collective instance as one rank saw it: the input of the cross-rank
// pass (clock alignment, straggler wait). Times are the rank's monotonic ns.
struct CollectiveInstance {
  uint64_t comm_id = 0, seq = 0;  // same (comm_id, seq) on every rank = one instance
  int64_t arrival_ns = 0;         // device-side start, or the blocking call's entry
  int64_t end_ns = 0;             // device-side completion, or the blocking call's return
  int64_t step_start_ns = 0;      // start of the step it falls in
  uint32_t exposed_at = 0, exposed_n = 0;  // its exposed time: RankReport::collective_exposed
};

// A rank's share of the cross-rank picture (zero / empty with one rank).
struct RankCross {
  int64_t clock_offset_ns = 0;     // added to this rank's ns to reach the common time base
  uint64_t times_last = 0;         // collective instances this rank arrived last at
  uint64_t instances = 0;          // instances matched with other ranks
  double p_value = 1;              // binomial: arriving last that often by chance
  double median_margin_ms = 0;     // how much later than the second last, when last
  int64_t waited_ns = 0;           // this rank's straggler wait, all steps
  int64_t caused_ns = 0;           // other ranks' wait while this rank was the last
  std::string top_cause;           // this rank's largest part over its steady steps
};

// `stallscope run --headspace`: the step with data for free, and what it
// tells about the input (docs/attach.md, "Headspace").
struct Headspace {
  // This run replayed kept batches (the hooks' "headspace replay" marks):
  // its steps measure the ceiling.
  bool replayed = false;
  uint64_t batches = 0;      // batches kept, largest over the loaders
  uint64_t bytes = 0;        // their tensors' bytes, summed
  bool capped = false;       // the byte cap stopped the keeping before K
  int64_t replay_start_ns = 0;  // the first replay mark
  size_t steps_before = 0;   // steps that began before it: warm-up (not data-free)
  // From a headspace run given with this one (`report --headspace DIR`,
  // `tune --headspace`): its median steady step, 0 when none.
  double ceiling_ms = 0;
  std::string ceiling_from;  // that run
  // (step − data stall) − ceiling where positive: what the loading cost the
  // trainer beyond its waits (CPU taken from it, memory bandwidth).
  double loader_cost_ms = 0;
};

struct RankReport {
  int64_t rank = -1;
  std::string host;
  std::vector<std::string> files;
  uint64_t events = 0;
  StepSource source = StepSource::kNone;
  std::string source_detail;     // e.g. the matched range name or pattern
  uint32_t trainer_tid = 0;
  bool device_activity = false;
  std::string compute_basis;     // "device", "cpu_only", "gpu_not_recorded"
  SpillVector<StepResult> steps;  // in start order (spill_vector.hpp: few in memory)
  size_t warmup_steps = 0;
  size_t steady_steps = 0;
  double step_p50_ms = 0, step_p90_ms = 0;
  std::array<PartStat, kPartCount> parts{};
  uint8_t split = 0;             // SplitBits over all steps
  std::vector<Stage> stages;      // one per StageKind, in kStages order
  CpuBudget cpu;
  std::string bottleneck;        // stage (or "cpu") with the least headroom, or "trainer"
  std::string cause;             // "input-bound: storage", "compute-bound", …
  std::string summary;           // the one-line summary
  std::vector<Remedy> remedies;  // best predicted gain first
  std::vector<RejectedRemedy> rejected_remedies;  // considered, not proposed (catalog order)
  std::vector<DataLoaderReport> dataloaders;  // the DataLoader hooks' loaders, by first use
  FeedReport feed;                             // producers behind channels and relays
  HostGapReport host_gaps;                     // the host parts' gaps, classed
  std::vector<SettingMark> settings;           // `set …` marks, in time order
  std::vector<PhaseStat> phases;               // `phase:*` ranges
  Headspace headspace;
  std::vector<std::string> command;            // the trainer's command line (metadata), "" unknown
  std::vector<Timeline> timelines;  // a typical and the longest steady step
  Drops drops;
  std::vector<std::string> warnings;
  // Multi-rank input, filled by the engine: every matched-able collective
  // instance in arrival order and the pool of their exposed intervals.
  SpillVector<CollectiveInstance> collectives;
  SpillVector<std::pair<int64_t, int64_t>> collective_exposed;
  int64_t realtime_offset_ns = 0;  // CLOCK_REALTIME − CLOCK_MONOTONIC at the recorder start
  bool realtime_known = false;
  RankCross cross;
};

// Moves the chunks of a rank's tables (steps, collectives) held in memory
// to the scratch file (spill_vector.hpp): for a rank set aside for a while.
inline void release_tables(const RankReport& r) {
  r.steps.release();
  r.collectives.release();
  r.collective_exposed.release();
}

// Who the others waited for (a rank named only when its lateness is more
// than chance; DESIGN.md "Scale").
struct Straggler {
  int64_t rank = -1;
  std::string host;
  uint64_t times_last = 0, instances = 0;
  double p_value = 1;
  double median_margin_ms = 0;
  int64_t caused_ns = 0;            // other ranks' straggler wait it caused
  std::string cause;                // its own cause in the interval before arriving late
  std::vector<std::pair<std::string, int64_t>> causes;  // cause → wait caused, largest first
};

// How the ranks' clocks were put on one time base.
struct ClockAlignment {
  std::string method;        // "single_host", "collectives", "wall_clock_only", "none"
  size_t hosts = 0;
  size_t matched = 0;        // collective instances used
  double residual_skew_us = 0;   // median |residual| after alignment (collectives)
  double max_error_ms = 0;   // wall_clock_only: how far it may be off
  struct Host {
    std::string host;
    double offset_ms = 0;    // correction on top of the wall clock
    double drift_ppm = 0;
    size_t matched = 0;
    double residual_us = 0;
  };
  std::vector<Host> per_host;
  std::string note;          // one sentence for the reports
};

struct CrossRank {
  bool present = false;      // two or more ranks
  size_t ranks = 0;
  ClockAlignment clock;
  uint64_t instances = 0;    // collective instances seen on 2+ ranks
  double step_max_over_median = 0;  // max over ranks of median step ÷ median of them
  double arrival_skew_p50_ms = 0, arrival_skew_p90_ms = 0;  // last − first arrival
  int64_t straggler_wait_ns = 0;     // all ranks, all steps
  std::vector<Straggler> stragglers;
  std::string common_cause;  // when no straggler: "all ranks wait mostly for the last rank's <cause>"
  // In the per-rank reports' words: "communication-bound on all 8 ranks: comm
  // transfer 31 % of step time (median over ranks)", or "mixed verdicts: …".
  std::string verdict;
  std::string summary;       // one line: the verdict, then stragglers or the common cause
};

struct Report {
  int schema_version = kSchemaVersion;
  std::vector<std::string> inputs;
  std::vector<RankReport> ranks;
  CrossRank cross;
  std::vector<std::string> warnings;  // input-level: unreadable files …
  std::vector<std::string> errors;
};

}  // namespace stallscope::analyzer
