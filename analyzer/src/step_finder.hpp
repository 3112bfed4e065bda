// Finds the steps of a rank, streaming: from step events, else from user
// ranges matching the step pattern, else from the hand-offs of objects to
// the trainer thread (channel messages and relay wake-ups the preload shim
// records, blocking or not), else from the period of the trainer thread's
// data waits. The source is chosen once, from the first window of events
// (or all of them when the input is shorter); steps then flow out in start
// order as soon as they are complete.
#pragma once

#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

struct StepCand {
  uint64_t index = 0;
  int64_t start = 0, end = 0;
  uint32_t track = 0;
  bool closed_by_analyzer = false;
};

class StepFinder {
 public:
  StepFinder(const RankTrace& trace, const std::regex& pattern);
  void on_event(const Ev& e);
  // Chooses the source from what was seen so far. Idempotent.
  void decide();
  bool decided() const noexcept { return decided_; }
  StepSource source() const noexcept { return source_; }
  uint32_t trainer_track() const noexcept { return trainer_; }
  bool has_trainer() const noexcept { return has_trainer_; }
  const std::string& detail() const noexcept { return detail_; }
  // Complete steps ending at or before t, in start order; removed from here.
  std::vector<StepCand> pop_ready(int64_t t);
  // How many steps pop_ready(t) would return.
  size_t ready_count(int64_t t) const;
  // End of input: closes open steps at `last_ns` (marked closed_by_analyzer).
  // Where nothing delimits steps, the trace from `window_first` to
  // `window_last` is one window (kWholeTrace) on the first process's main
  // thread.
  void finish(int64_t last_ns, int64_t window_first, int64_t window_last);
  uint64_t unmatched_ends() const noexcept { return unmatched_ends_; }

 private:
  struct Open { uint64_t index; int64_t start; uint32_t name; };
  void on_step(const Ev& e);
  void on_range(const Ev& e);
  void on_wait(const Ev& e);
  void on_phase_range(const Ev& e);
  void on_handoff(const Ev& e);
  void add_handoff_step(uint32_t track, int64_t asked, int64_t got);
  // The shortest time the trainer spends between getting one object and
  // asking for the next that starts a step, from the hand-offs seen before
  // deciding: 0 when every hand-off opens a step; past a clear jump between
  // sorted gaps, the short ones under 2 ms, when the trainer takes several
  // objects together (inputs and labels, micro-batches). The time between
  // two gets, not between two arrivals: producers that deliver in bursts
  // do not make a step of two iterations.
  int64_t handoff_gap(uint32_t track) const;
  uint32_t handoff_consumer() const;
  static constexpr uint32_t kNoTrack = ~0u;
  static constexpr size_t kMaxKeptHandoffs = 1u << 16;
  void add_range(uint32_t track, uint32_t name, int64_t a, int64_t b);
  void add_wait_step(uint32_t track, int64_t a);
  void accept(const StepCand& c);
  uint32_t busiest(const std::map<uint32_t, std::vector<StepCand>>& by_track) const;

  const RankTrace& trace_;
  const std::regex& pattern_;
  std::unordered_map<uint32_t, bool> name_matches_;
  bool decided_ = false, has_trainer_ = false;
  StepSource source_ = StepSource::kNone;
  uint32_t trainer_ = 0;
  std::string detail_;
  std::map<uint32_t, std::vector<StepCand>> steps_, ranges_, waits_;  // by track
  std::map<uint32_t, std::vector<Open>> open_steps_, open_ranges_;
  std::map<uint32_t, std::string> range_class_;
  // Hand-offs to each consumer thread: when its gets began (before
  // deciding), the last one that opened a step, how many steps they made.
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> handoff_times_;  // (asked, got)
  std::map<uint32_t, int64_t> last_got_, last_handoff_step_;
  std::map<uint32_t, uint64_t> handoff_steps_;
  // Who handed objects to whom (pid << 32 | tid each): a relay's own
  // receives are not the trainer's.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> handing_;  // -> count
  uint64_t thread_key(uint32_t track) const;
  int64_t handoff_gap_ = 0;
  std::map<uint32_t, int64_t> last_wait_start_;
  std::map<uint32_t, uint64_t> wait_count_;
  // Begin/end ranges open on each track (their names), to tell an open
  // phase:NAME range: its data waits are no steps.
  std::map<uint32_t, std::vector<uint32_t>> range_names_;
  bool in_phase(uint32_t track) const;
  std::vector<StepCand> ready_;  // chosen source, sorted by start
  uint64_t unmatched_ends_ = 0;
};

}  // namespace stallscope::analyzer
