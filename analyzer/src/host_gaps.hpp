// What the host did while the device idled: each gap of a step's host
// parts (a maximal device-idle interval outside data stalls) is classed
// — sync, launch, cpu_op, data, untraced — from the trainer's activities
// (CPU operators, Python frames, ranges, CUDA API calls, stack samples),
// and their exclusive time inside the gaps is summed per class over the
// run (docs/report-guide.md "Host gaps"). A gap has one class, so the
// classes partition the host parts exactly.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "attribution.hpp"
#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

// What a name says about an activity (bits, decided once per name).
enum NameBits : uint8_t {
  kNameData = 1,       // data loading: a DataLoader, a Dataset, collate, a batch fetch
  kNameLogging = 2,    // print, logging, wandb, TensorBoard, a metrics call
  kNameOptimizer = 4,  // an optimizer step (Optimizer.step#…, torch/optim frames)
  kNameStep = 8,       // a step range (the step pattern): no activity of its own
  kNameLaunch = 16,    // an API call that launches device work (cudaLaunchKernel, memcpy/memset)
  kNameDecided = 128,
};
// The bits of `name` other than kNameStep and kNameDecided.
uint8_t name_bits(std::string_view name);

// NameBits by name id of one rank, computed on first use.
class NameFlags {
 public:
  NameFlags(const std::vector<std::string>& names, const std::regex& step_pattern)
      : names_(names), step_(step_pattern) {}
  uint8_t of(uint32_t id) {
    // Decided names answer inline: a step's classing asks for every activity.
    if (id < bits_.size() && (bits_[id] & kNameDecided)) return bits_[id];
    return decide(id);
  }

 private:
  uint8_t decide(uint32_t id);
  const std::vector<std::string>& names_;
  const std::regex& step_;
  std::vector<uint8_t> bits_;
};

// A gap as the run's list of longest gaps keeps it (names are ids).
struct GapEntry {
  int64_t len = 0, start_rel = 0;  // ns; start from the step's start
  uint64_t step = 0;
  GapClass cls = GapClass::kUntraced;
  ActivityKind top_kind = ActivityKind::kOperator;
  uint32_t top = 0;           // 0: none
  uint32_t made_op = 0, made_frame = 0;  // a sync gap: what made the call
};

// Sums over steps (every map is bounded by the rank's distinct names).
struct GapTotals {
  static constexpr size_t kLongest = 16;
  // Exclusive ns by (class, kind, name): key = class << 40 | kind << 32 | name.
  std::unordered_map<uint64_t, int64_t> activity;
  // Sync gaps' ns by (call, op that made it, frame that made it).
  struct SyncKey {
    uint32_t call, op, frame;
    ActivityKind kind;
    bool operator==(const SyncKey&) const = default;
  };
  struct SyncHash {
    size_t operator()(const SyncKey& k) const noexcept {
      return (uint64_t{k.call} * 0x9E3779B97F4A7C15ull) ^ (uint64_t{k.op} << 20) ^ k.frame ^
             (uint64_t(k.kind) << 60);
    }
  };
  std::unordered_map<SyncKey, int64_t, SyncHash> sync_calls;
  std::unordered_map<uint32_t, int64_t> optimizer, logging;  // covering name -> ns
  int64_t optimizer_ns = 0, logging_ns = 0;
  uint64_t launches = 0;  // launch calls in launch-bound gaps
  GapNs launch_ns{};      // launch-call ns inside the gaps, by class
  std::array<uint64_t, kGapClassCount> gaps{};
  std::vector<GapEntry> longest;  // a heap, the shortest on top
  // The steps summed: how many, their wall time, host parts and classes.
  size_t steps = 0;
  int64_t wall_ns = 0, host_ns = 0;
  GapNs class_ns{};

  void add_longest(const GapEntry& g) {  // every gap of every step comes by
    if (longest.size() < kLongest || g.len > longest.front().len) push_longest(g);
  }
  void push_longest(const GapEntry& g);
  void merge(const GapTotals& o);
};

// Classes the gaps of one step. Working sets are kept between calls.
class GapClassifier {
 public:
  explicit GapClassifier(NameFlags& flags) : flags_(flags) {}
  // `acts`: the trainer's activities overlapping the step (reordered and
  // filtered in place). Returns the ns per class (sums to length(hs.host)).
  GapNs classify(const HostSets& hs, int64_t step_start, uint64_t step_index,
                 std::vector<HostActivity>& acts, GapTotals& out);

 private:
  struct Credit {
    uint32_t gap, act;
    int64_t ns;
  };
  void sweep(const Ivs& gaps, const std::vector<HostActivity>& acts);
  struct PerGap {  // one gap of the step, zeroed per step
    int64_t after = 0, data = 0, opt = 0, log = 0;  // ns in: after a sync, data loading, optimizer, logging
    int64_t launch_dur = 0, launch_in = 0;  // the longest launch call overlapping it; launch-call ns in it
    uint32_t launch_n = 0;                  // launch calls overlapping it
  };
  void coverage(const Ivs& gaps, const std::vector<HostActivity>& acts, uint8_t bit, uint8_t present,
                int64_t PerGap::*field);
  void launches(const Ivs& gaps, const std::vector<HostActivity>& acts);
  GapClass decide(size_t g, const Ivs& gaps, const Iv* next_busy, int64_t traced) const;
  uint32_t optimizer_name(const std::vector<HostActivity>& acts);
  void credit_activities(size_t from, size_t to, GapClass cls, const std::vector<HostActivity>& acts,
                         GapTotals& out, GapEntry& e);
  void side_totals(const Iv& gap, GapClass cls, int64_t opt, int64_t logging,
                   const std::vector<HostActivity>& acts, const GapEntry& e, GapTotals& out);
  int64_t& activity(GapTotals& out, uint64_t key);
  void sync_call(const Iv& gap, const Ivs& after, const std::vector<HostActivity>& acts,
                 GapEntry& e, GapTotals& out);

  NameFlags& flags_;
  std::vector<Credit> credits_;
  std::vector<uint32_t> stack_;
  std::vector<PerGap> per_gap_;
  Ivs cover_, tmp_;
  std::vector<std::pair<uint64_t, int64_t>> agg_;
  static constexpr uint64_t kNoKey = ~uint64_t{0};  // (keys use 40 + 8 bits)
  uint64_t last_key_ = kNoKey;
  int64_t* last_ns_ = nullptr;  // out.activity[last_key_] of this step
  uint32_t opt_name_ = 0;       // the step's optimizer (optimizer_name), once asked
  bool opt_known_ = false;
};

// The report's block from the totals of the steady steps (`names`: the rank's).
void fill_host_gaps(HostGapReport& r, const GapTotals& t, const std::vector<std::string>& names);

}  // namespace stallscope::analyzer
