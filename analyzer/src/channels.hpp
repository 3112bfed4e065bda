// Windowed event storage of the streaming engine: intervals waiting for the
// steps they overlap (Channel) and sampled rates such as a thread's CPU use
// (RateSeries). Both drop what finalized steps no longer need, so memory is
// bounded by the events of the window, not of the trace.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "interval.hpp"
#include "stallscope/analyzer/model.hpp"

namespace stallscope::analyzer {

// Intervals of one category, handed out step by step in increasing time.
class Channel {
 public:
  void add(int64_t a, int64_t b) { append(pending_, a, b); }
  // Sorts what arrived since the last call (before a run of take()).
  void prepare();
  // The intervals overlapping [s, e), clipped and normalized. Calls must
  // come with increasing s.
  void take(int64_t s, int64_t e, Ivs& out);
  // As take(), for a step that does not need the intervals.
  void skip(int64_t s, int64_t e);
  // Forgets the intervals consumed by take().
  void trim();
  // Drops everything ending before t (used while no steps are known).
  void drop_before(int64_t t);
  size_t size() const noexcept { return pending_.size() - cursor_ + carry_.size(); }

 private:
  void sort_runs(size_t from);

  std::vector<Iv> pending_;
  std::vector<Iv> scratch_;    // sort_runs() and prepare(): reused, never shrunk
  std::vector<size_t> cuts_;   // sort_runs(): run boundaries
  size_t cursor_ = 0;
  size_t sorted_ = 0;  // pending_[cursor_, sorted_) is sorted by start
  Ivs carry_;  // taken intervals that reach past the last step
};

// The trainer's named activities (ranges, API calls, syncs, stack
// samples), handed out step by step like Channel's intervals: each taken
// clipped to the step, those reaching past it kept for the next.
class ActivityChannel {
 public:
  void add(int64_t a, int64_t b, uint32_t name, ActivityKind kind) {  // in place (interval.hpp's append)
    HostActivity& x = pending_.emplace_back();
    x.a = a;
    x.b = b;
    x.name = name;
    x.kind = kind;
  }
  // Sorts what was not taken yet by start (before a run of take()).
  void prepare();
  // Appends the activities overlapping [s, e), clipped. Calls must come
  // with increasing s.
  void take(int64_t s, int64_t e, std::vector<HostActivity>& out);
  void trim();
  void drop_before(int64_t t);

 private:
  std::vector<HostActivity> pending_, carry_;
  size_t cursor_ = 0;
  size_t sorted_ = 0;  // pending_[cursor_, sorted_) is sorted by start
};

// The same over activities already sorted by start (RankTrace::trainer_spans).
class ActivityWindow {
 public:
  void take(const std::vector<HostActivity>& src, int64_t s, int64_t e,
            std::vector<HostActivity>& out);

 private:
  std::vector<HostActivity> carry_;
  size_t cursor_ = 0;
  int64_t last_s_ = INT64_MIN;
};

// Intervals of one category kept per track (the data producers' reads and
// preprocessing: most of a data-heavy trace's events). Each track's
// intervals stay sorted by end as they arrive (a thread records an interval
// when it ends), so nothing is sorted per step; the few steps that need the
// intervals (the inferred split, timeline snapshots) gather them from every
// track with a binary search.
class LaneChannel {
 public:
  void add(uint32_t track, int64_t a, int64_t b) {
    if (track >= lanes_.size()) lanes_.resize(track + 1);
    Lane& l = lanes_[track];
    if (l.ivs.size() == l.cursor || l.ivs.back().b <= b) {
      append(l.ivs, a, b);
    } else {
      insert_sorted(l, {a, b});
    }
    l.max_len = b - a > l.max_len ? b - a : l.max_len;
  }
  // The intervals overlapping [s, e), clipped and normalized.
  void take(int64_t s, int64_t e, Ivs& out) const;
  // Appends the intervals overlapping [s, e), clipped: one ascending run
  // per track, not normalized.
  void collect(int64_t s, int64_t e, Ivs& out) const;
  // As collect(), per track: fn(track, a, b) for each interval overlapping
  // [s, e), clipped, in each track's end order.
  template <class F>
  void for_each(int64_t s, int64_t e, F&& fn) const {
    for (size_t t = 0; t < lanes_.size(); ++t) {
      const Lane& l = lanes_[t];
      auto it = std::upper_bound(l.ivs.begin() + static_cast<long>(l.cursor), l.ivs.end(), s,
                                 [](int64_t x, const Iv& v) { return x < v.b; });
      for (; it != l.ivs.end() && it->b - l.max_len < e; ++it)
        if (it->a < e) fn(static_cast<uint32_t>(t), std::max(it->a, s), std::min(it->b, e));
    }
  }
  // Forgets intervals ending at or before t (no later step overlaps them).
  void drop_before(int64_t t);
  size_t size() const noexcept;

 private:
  struct Lane {
    std::vector<Iv> ivs;  // [cursor, end) sorted by end
    size_t cursor = 0;
    int64_t max_len = 0;  // longest interval added
  };
  static void insert_sorted(Lane& l, const Iv& v);
  std::vector<Lane> lanes_;  // by track
  mutable std::vector<Iv> scratch_;  // take(): reused
  mutable std::vector<size_t> cuts_;
};

// A piecewise-constant rate: segments [a, b) with a value per ns (CPU ns per
// ns of a thread, idle CPUs). Built from cumulative or per-period samples.
class RateSeries {
 public:
  // Cumulative sample (e.g. cpu.thread_ns): the increase since the previous
  // sample is spread over at most `period_ns` before t (the sampler reports
  // a thread only when its time changed).
  void add_cumulative(int64_t t, double total, int64_t period_ns);
  // Per-period sample (cpu.idle): `value` held since the previous sample.
  void add_level(int64_t t, double value);
  // ∫ rate over `set` (value × ns).
  double integrate(const Ivs& set) const;
  // ns of `set` covered by any segment.
  int64_t covered(const Ivs& set) const;
  void drop_before(int64_t t);
  bool empty() const noexcept { return segs_.empty(); }
  double first_total() const noexcept { return first_total_; }
  int64_t first_t() const noexcept { return first_t_; }  // time of the first sample
  double last_total() const noexcept { return last_total_; }
  bool has_samples() const noexcept { return have_; }

 private:
  struct Seg {
    int64_t a, b;
    double v;
  };
  void push(const Seg& s);
  std::deque<Seg> segs_;
  bool have_ = false;
  int64_t last_t_ = 0;
  double last_total_ = 0, first_total_ = 0;
  int64_t first_t_ = 0;
};

}  // namespace stallscope::analyzer
