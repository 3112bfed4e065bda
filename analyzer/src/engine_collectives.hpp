// The engine's log of collective instances for the cross-rank pass: each
// collective with a (communicator, sequence) identity is kept until its step
// is attributed, then stored compactly with the step it fell in and its
// exposed time (collective running, no compute) — what straggler wait can
// later be carved from (multirank/straggler.cpp).
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "interval.hpp"
#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

class CollectiveLog {
 public:
  // A complete collective event (Collective::comm, Collective::seq)
  // on a track of `type`. Only device-side ones are kept (a GPU stream, or the
  // emulated device): a host thread's collective is an NCCL enqueue, whose
  // times say nothing about when the rank arrived.
  void add(const Ev& e, TrackType type);
  // Step [s, e) attributed with these (normalized, clipped) comm and compute sets.
  void on_step(int64_t s, int64_t e, const Ivs& comm, const Ivs& compute);
  // Hands the log to the rank's report.
  void take(RankReport& r);

 private:
  // Pending instances waiting for a step; bounded so a run whose steps are
  // never found cannot grow it without end.
  static constexpr size_t kMaxPending = size_t{1} << 16;
  std::deque<CollectiveInstance> pending_;  // sorted by arrival
  SpillVector<CollectiveInstance> done_;
  SpillVector<std::pair<int64_t, int64_t>> exposed_;
  Ivs tmp_;
};

}  // namespace stallscope::analyzer
