// Lineage of batches: which reads and preprocessing items produced each
// batch, kept for a bounded time horizon, and the backward walk along a late
// batch's dependency chain (DESIGN.md "Splitting a data stall").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "flat_map.hpp"
#include "interval.hpp"
#include "ring.hpp"
#include "stallscope/analyzer/model.hpp"

namespace stallscope::analyzer {

// One piece of the chain: [a, b) spent in storage (read in flight or waiting
// for submission) or in preprocessing (waiting for a worker, working, collate).
struct ChainSeg {
  int64_t a = 0, b = 0;
  bool storage = false;
};

struct Batch {
  uint64_t id = 0;
  int64_t ready = 0;
  std::vector<uint64_t> samples;
};

// sample id -> the items (by lineage Id) that read or preprocessed it, newest
// first: flat head tables and a ring of links evicted in the order items
// were added, so no allocation per sample. Heads live in two generations of
// tables: new heads go to the current one; when it holds as many keys as
// there are live links and every link of the older generation has been
// evicted, the older table is emptied and becomes the current one. A head
// whose link was evicted is stale (below base_) and reads as absent.
class SampleIndex {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};
  void add(uint64_t sample, uint64_t item);
  // Calls fn(item) for each live item of `sample` (item >= item_base), newest first.
  template <typename Fn>
  void for_each(uint64_t sample, uint64_t item_base, Fn&& fn) const {
    for (uint64_t l = head(sample); l != FlatMap64::kAbsent && l >= base_;) {
      const Link& k = links_[static_cast<size_t>(l - base_)];
      if (k.item < item_base) return;
      fn(k.item);
      l = k.next;
    }
  }
  // Forgets the links of items below `item_base`.
  void evict(uint64_t item_base);
  size_t size() const noexcept { return links_.size(); }

 private:
  uint64_t head(uint64_t sample) const noexcept {
    const uint64_t l = cur_.get(sample);
    return l != FlatMap64::kAbsent ? l : old_.get(sample);
  }
  void rotate();

  struct Link {  // 16 bytes: one per indexed sample of the window
    uint64_t item, next;
  };
  FlatMap64 cur_, old_;
  uint64_t cur_first_ = 0;  // first link whose head went to cur_
  Ring<Link> links_;
  uint64_t base_ = 0;
  // Links are added in item order except for a group's later samples
  // (Lineage::index_groups): evict() searches the ring when no link out of
  // order is left in it.
  uint64_t max_item_ = 0;
  uint64_t disorder_at_ = kNone;  // the newest link added out of item order
};

class Lineage {
 public:
  // Keep a read or preprocessing item that names a sample; false (nothing
  // kept) for one that does not.
  bool add_read(const Ev& e);
  bool add_preprocess(const Ev& e);
  void add_batch(uint64_t id, int64_t ready, std::span<const uint64_t> samples);
  // The batch that ended a data wait: by id when known, else the last one
  // ready within [wait_start, wait_end]. nullptr when none is known.
  const Batch* batch_for(uint64_t id, int64_t wait_start, int64_t wait_end) const;
  // The chain from `b`'s ready time back to `stop`, latest piece first (into `out`).
  void walk(const Batch& b, int64_t stop, std::vector<ChainSeg>& out) const;
  // Appends the kept items' busy intervals overlapping [a, b), clipped:
  // reads (from submission, queue wait included) and preprocessing. The
  // output is one ascending run per thread, not normalized.
  void collect_busy(int64_t a, int64_t b, Ivs& reads, Ivs& pre) const;
  // As collect_busy, per producer track: fn(track, read, a, b).
  void collect_busy_tracks(int64_t a, int64_t b,
                           const std::function<void(uint32_t, bool, int64_t, int64_t)>& fn) const;
  // Forgets items and batches that ended before `t`.
  void evict_before(int64_t t);
  size_t items() const noexcept { return items_.size(); }

 private:
  struct Item {  // 48 bytes: a million of them in a large window
    int64_t start = 0, end = 0, queued = 0;
    uint64_t sample = 0;  // first sample
    uint64_t batch = 0;   // batch id, 0 when unknown
    uint32_t track = 0;
    uint16_t count = 0;   // samples covered (<= kMaxIndexedSamples): consecutive entries of its batch's list
    bool read = false;
  };
  using Id = uint64_t;  // base_ + position in items_
  static constexpr Id kNone = ~Id{0};

  const Item& at(Id id) const { return items_[static_cast<size_t>(id - base_)]; }
  Id add(const Item& it);
  // Of the items of `sample` (reads, else preprocessing) and `best`, the
  // one that finished last at or before t.
  Id last_done(uint64_t sample, bool read, int64_t t, Id best) const;
  // As last_done for the reads, then for the preprocessing of `sample`.
  Id last_done_both(uint64_t sample, int64_t t, Id best) const;
  Id later(Id best, Id id) const { return best == kNone || at(id).end > at(best).end ? id : best; }
  Id lane_prev(uint32_t track, int64_t t) const;
  Id pred_of(Id node, int64_t t) const;
  // Calls fn(sample) for each sample an item covers.
  template <typename Fn>
  void for_samples(const Item& it, Fn&& fn) const;
  Id collate_pred(const Batch& b) const;
  void index_groups(uint64_t id, std::span<const uint64_t> samples);

  Ring<Item> items_;
  Id base_ = 0;
  // Every kMarkEvery items, the latest end of all items so far: the items
  // below a mark whose end is before t are all evicted at once by
  // evict_before(t), not read one by one.
  struct Mark {
    Id upto;
    int64_t max_end;
  };
  static constexpr Id kMarkEvery = 256;
  Ring<Mark> marks_;
  int64_t max_end_ = INT64_MIN;
  SampleIndex by_sample_;       // reads and preprocessing
  SampleIndex reads_by_batch_;  // keyed by batch id (a storage_read's corr)
  struct Lane {
    Ring<Id> ids;         // sorted by end
    int64_t max_len = 0;  // longest busy interval added (queue wait included)
    bool disordered = false;  // an id was inserted before a larger one
    mutable size_t hint = SIZE_MAX;  // lane_prev's last answer in this walk
  };
  bool sweep(Ring<Id>& ids) const;
  std::vector<Lane> lanes_;  // by track
  std::deque<Batch> batches_;                           // by ready time
  std::unordered_map<uint64_t, size_t> batch_pos_;      // id -> index + batch_base_
  size_t batch_base_ = 0;
};

}  // namespace stallscope::analyzer
