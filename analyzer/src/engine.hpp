// The streaming engine of one rank: events in (any process of the rank, in
// roughly the order the recorder flushed them), steps out with their
// attribution as soon as every event they depend on can have arrived.
//
//   RankEngine eng(trace, opt);          // trace: procs, tracks, names (may grow)
//   for (each event e) eng.ingest(e, ids);
//   eng.advance(safe_ns);                // now and then: no event will end before safe_ns
//   RankReport r = eng.finish();
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <regex>
#include <span>
#include <utility>
#include <vector>

#include "attribution.hpp"
#include "channels.hpp"
#include "decimated.hpp"
#include "engine_collectives.hpp"
#include "host_gaps.hpp"
#include "lineage.hpp"
#include "loader_model.hpp"
#include "nccl_join.hpp"
#include "producers.hpp"
#include "run_stats.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "step_finder.hpp"
#include "summary.hpp"

namespace stallscope::analyzer {

class RankEngine {
 public:
  RankEngine(const RankTrace& trace, const AnalyzeOptions& opt);
  // Inline: it runs once per event of the trace, from the input loop.
  // Inline into the input loop: it runs once per event.
  [[gnu::always_inline]] inline void ingest(const Ev& e, std::span<const uint64_t> ids);
  void advance(int64_t safe_ns);
  RankReport finish();
  uint64_t events() const noexcept { return events_; }
  void add_drops(const Drops& d);
  void warn(std::string w) { warnings_.push_back(std::move(w)); }

 private:
  struct WaitRec {
    int64_t a, b;
    uint64_t batch;
  };
  struct TrainerChans {
    Channel waits, api, sync;
    ActivityChannel acts;  // its ranges, API calls and syncs, named
    std::deque<WaitRec> recs;
    // While recs are in end order, a step's waits are found by binary
    // search and the walk stops max_wait past the step's end.
    bool recs_by_end = true;
    int64_t max_wait = 0;
  };
  enum class CounterKind : int8_t { kUnknown, kOther, kThreadNs, kChildNs, kProcessNs, kIdle,
                                    kThrottledPeriods, kThrottledNs, kMajorFaults,
                                    kSamplePeriod };

  void route_device(const Ev& e);
  void route_trainer(const Ev& e);
  void route_enqueue(const Ev& e);
  void route_data(const Ev& e, std::span<const uint64_t> ids);
  void route_nccl_kernel(Ev e);
  void add_device_collective(const Ev& e);
  void add_joined_kernels();
  void on_counter(const Ev& e);
  CounterKind counter_kind(uint32_t name);
  void on_decided();
  void on_mark(const Ev& e);
  void on_headspace_mark(int64_t at, const std::string& text);
  void on_phase(const Ev& e);
  void route_activity(const Ev& e);
  void route_sample(const Ev& e);
  void classify_gaps(const StepCand& c, StepResult& r);
  void finish_gaps(RankReport& r);
  void add_phase(uint32_t name, int64_t a, int64_t b);
  void close_open_phases();  // at the end of input: a phase training never closed
  void finalize(const StepCand& c);
  void take_ops(int64_t a, int64_t b, StepInputs& in) const;
  void trim(int64_t before);
  DataSplit split_stall(const Ivs& stall, int64_t s, int64_t e);
  DataSplit split_by_lineage(const Ivs& piece, const WaitRec& w, bool* ok);
  DataSplit split_inferred(const Ivs& piece);
  int64_t trainer_cpu(const Ivs& set) const;
  double producer_cpu(const Ivs& set);
  const RateSeries* read_as_child(uint32_t proc) const;
  TrainerChans* trainer_chans();
  void add_warnings(RankReport& r) const;
  void add_import_notes(RankReport& r) const;
  void snapshot(const StepInputs& in, const StepResult& r);
  void device_lanes(const StepInputs& in, const StepResult& r, Timeline& t) const;
  void producer_lanes(const StepResult& r, Timeline& t) const;
  // A timeline lane's label for a track: "GPU 0 stream 7", "trainer",
  // "ss-loader-io tid 40", "DataLoader worker 0 pid 12" (the pid where the
  // trace holds several processes).
  std::string track_label(uint32_t track) const;

  const RankTrace& trace_;
  AnalyzeOptions opt_;
  std::regex re_;
  StepFinder finder_;
  Channel compute_, comm_, h2d_, other_, d2h_;
  // The same device intervals by track (stream) and kind — kernels,
  // collectives, H2D, other — for the timelines' lanes only.
  std::array<LaneChannel, 4> streams_;
  LaneChannel reads_, pre_;  // the producers' threads
  // Producers' activity over a span of the step being finalized, taken
  // from reads_ and pre_ only when asked for (inferred split, timeline).
  Ivs prod_reads_, prod_pre_, prod_scratch_;
  StepInputs step_in_;  // finalize(): refilled for each step
  // Host gaps (host_gaps.hpp): the trainer's stack samples by (proc, tid)
  // until the trainer is known, the step's activities, and the totals of
  // the first steps one by one (warm-up is known only at the end).
  std::map<std::pair<uint32_t, uint32_t>, ActivityChannel> samples_;
  ActivityWindow ops_window_;
  NameFlags name_flags_;
  GapClassifier gap_classifier_;
  StepSets step_sets_;  // the attribution's sets of the step being finalized (its host sets: the gaps')
  std::vector<HostActivity> step_acts_;
  GapTotals gap_totals_;
  std::vector<std::pair<int64_t, GapTotals>> gap_early_;  // (step start, its totals)
  Ivs step_tmp_;
  struct SplitSets {  // split_stall() and what it calls: refilled for each stall
    Ivs rest, piece, tmp, wait;                // split_stall
    std::vector<ChainSeg> chain;               // split_by_lineage
    Ivs storage, pre, pre_only, x;
    Ivs inf_x, inf_rest, inf_rest2;            // split_inferred
    Ivs producer_early;                        // producer_cpu
  } split_;
  std::vector<size_t> prod_cuts_;
  void take_producers(int64_t a, int64_t b);
  std::map<uint32_t, TrainerChans> chans_;  // by track; only the trainer's once decided
  std::map<std::pair<uint32_t, uint64_t>, RateSeries> thread_cpu_, child_cpu_;
  // Sampler period of each process (by proc index; 0: opt_.sample_period_ns),
  // from its sampler.period_ms counter: forked workers sample more slowly.
  std::vector<int64_t> proc_period_ns_;
  int64_t period_of(uint32_t proc) const {
    return proc < proc_period_ns_.size() && proc_period_ns_[proc] > 0 ? proc_period_ns_[proc]
                                                                      : opt_.sample_period_ns;
  }
  std::vector<CounterKind> counter_kinds_;
  Lineage lineage_;
  LoaderModel loaders_;                  // the DataLoader hooks' records
  ProducerModel producers_;              // hand-offs through channels and relays
  double producer_cpu_ns(uint32_t pid, uint32_t tid) const;
  std::vector<SettingMark> settings_;    // `set …` marks
  Headspace headspace_;                  // `headspace replay …` marks
  std::map<std::string, PhaseStat> phases_;
  std::map<uint32_t, std::vector<std::pair<uint32_t, int64_t>>> open_phases_;  // track -> (name, start)
  CollectiveLog collectives_;  // for the cross-rank pass
  NcclJoin nccl_join_;         // NCCL kernels (CUPTI) <- their calls
  RunStats stats_;
  Drops drops_;
  SpillVector<StepResult> steps_;  // finalized, in start order (nearly always)
  int64_t last_step_start_ = INT64_MIN;
  bool steps_in_order_ = true;
  // Taken as the steps are made, so that the end of the rank reads the
  // step table (spilled: spill_vector.hpp) once, not once per figure.
  uint8_t steps_split_ = 0;                 // SplitBits of every step
  size_t steps_closed_ = 0;                 // steps closed by the analyzer
  Decimated<int64_t> step_walls_{kSampleCap};  // for the warm-up's median
  std::vector<std::string> warnings_;
  Timeline typical_, longest_;
  static constexpr size_t kLineageSteps = 64;
  static constexpr size_t kBatchSteps = 32;
  std::deque<int64_t> recent_starts_;
  double wall_sum_ = 0;
  uint64_t events_ = 0;
  int64_t finalized_until_ = INT64_MIN;
  bool device_seen_ = false, cpu_unknown_seen_ = false, gpu_track_ = false;
  uint64_t cuda_api_ = 0;
  // Step events an importer inferred (StepSource::kInferred) and the others.
  uint64_t steps_inferred_ = 0, steps_marked_ = 0;
  uint64_t last_file_ = ~uint64_t{0};                 // of the previous read
  std::pair<uint32_t, uint32_t> last_worker_{~0u, ~0u};  // of the previous preprocess item
  uint32_t trainer_proc_ = 0, trainer_tid_ = 0;
  int64_t all_first_ns_ = INT64_MAX, all_last_ns_ = INT64_MIN;  // every event, notes included
};

void RankEngine::ingest(const Ev& e, std::span<const uint64_t> ids) {
  ++events_;
  // The run's span: what the processes did, not their notes about it.
  constexpr auto bit = [](Kind k) { return uint32_t{1} << static_cast<uint8_t>(k); };
  constexpr uint32_t kNotes = bit(Kind::kCounter) | bit(Kind::kGap) | bit(Kind::kLoaderConfig) |
                              bit(Kind::kStackSample);
  const auto kind = static_cast<uint8_t>(e.kind);
  if (kind >= 32 || ((kNotes >> kind) & 1) == 0) {
    stats_.first_ns = std::min(stats_.first_ns, e.start);
    stats_.last_ns = std::max(stats_.last_ns, e.end);
  }
  // With the notes: the whole-trace window of a run nothing delimits
  // (the CPU sampler's counters span a CPU-only program's run).
  all_first_ns_ = std::min(all_first_ns_, e.start);
  all_last_ns_ = std::max(all_last_ns_, e.end);
  if (e.end < finalized_until_ && e.kind != Kind::kCounter && e.kind != Kind::kGap) {
    ++drops_.late_events;
  }
  switch (e.kind) {
    case Kind::kStep:
      ++(e.step().source == format::StepSource::kInferred ? steps_inferred_ : steps_marked_);
      finder_.on_event(e);
      break;
    case Kind::kRange: finder_.on_event(e); on_phase(e); route_activity(e); break;
    case Kind::kStackSample: route_sample(e); break;
    case Kind::kDataWait: finder_.on_event(e); route_trainer(e); loaders_.on_wait(e); break;
    case Kind::kSample: loaders_.on_sample(e); break;
    case Kind::kLoaderConfig: loaders_.on_config(e); break;
    case Kind::kBatchHandoff: loaders_.on_handoff(e); break;
    case Kind::kChannelHandoff:
      if (producers_.on_handoff(e)) finder_.on_event(e);
      break;
    case Kind::kMark: on_mark(e); break;
    case Kind::kApiCall:
      // Complete calls only: instants (CUPTI's external correlation
      // records) carry a correlation id but are no launch.
      if (e.phase == format::kComplete) nccl_join_.add_launch(e);
      route_trainer(e);
      break;
    case Kind::kSync: route_trainer(e); break;
    case Kind::kStorageRead:
      loaders_.on_read(e);
      producers_.on_read(e);
      route_data(e, ids);
      break;
    case Kind::kPreprocess: case Kind::kBatchReady: route_data(e, ids); break;
    case Kind::kKernel: case Kind::kCollective: case Kind::kH2D: case Kind::kD2H:
    case Kind::kD2D: case Kind::kMemset:
      route_device(e);
      break;
    case Kind::kCounter: on_counter(e); break;
    case Kind::kGap: drops_.buffer_dropped += e.corr; break;
    default: break;
  }
  if (!finder_.decided() && events_ % opt_.decide_events == 0) {
    finder_.decide();
    if (finder_.decided()) on_decided();
  }
}

}  // namespace stallscope::analyzer
