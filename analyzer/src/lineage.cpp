#include "lineage.hpp"

#include <algorithm>

namespace stallscope::analyzer {

namespace {
// A preprocessing item covering more samples is indexed by its first ones only.
constexpr uint32_t kMaxIndexedSamples = 1024;
// The smallest generation of sample heads (a short window rotates no more often).
constexpr size_t kMinGeneration = 4096;
}  // namespace

void SampleIndex::add(uint64_t sample, uint64_t item) {
  if (sample == 0 || sample == ~uint64_t{0}) return;  // "none", and the map's reserved key
  const uint64_t l = base_ + links_.size();
  uint64_t prev = cur_.exchange(sample, l);
  if (prev == FlatMap64::kAbsent) prev = old_.get(sample);
  links_.push_back({item, prev == FlatMap64::kAbsent || prev < base_ ? kNone : prev});
  if (item < max_item_) disorder_at_ = l; else max_item_ = item;
  if (cur_.size() >= std::max<size_t>(links_.size(), kMinGeneration) && base_ >= cur_first_) rotate();
}

// Every head in old_ is stale: its table is emptied and takes the next
// generation's heads. It is sized for as many as the generation just ended
// (so it does not grow by doubling on the way), and shrunk when far larger.
void SampleIndex::rotate() {
  const size_t want = std::max({links_.size(), cur_.size(), kMinGeneration});
  if (old_.room() < want || old_.room() > 4 * want) old_.reset(want); else old_.clear();
  std::swap(cur_, old_);
  cur_first_ = base_ + links_.size();
}

void SampleIndex::evict(uint64_t item_base) {
  if (disorder_at_ == kNone || disorder_at_ < base_) {  // items ascend along the ring
    const size_t n = links_.partition_point([&](const Link& k) { return k.item < item_base; });
    links_.pop_front(n);
    base_ += n;
    return;
  }
  while (!links_.empty() && links_.front().item < item_base) {
    links_.pop_front();
    ++base_;
  }
}

[[gnu::always_inline]] inline Lineage::Id Lineage::add(const Item& it) {
  const Id id = base_ + items_.size();
  items_.push_back(it);
  max_end_ = std::max(max_end_, it.end);
  if ((id + 1) % kMarkEvery == 0) marks_.push_back({id + 1, max_end_});
  if (it.track >= lanes_.size()) lanes_.resize(it.track + 1);
  Lane& l = lanes_[it.track];
  l.max_len = std::max(l.max_len, it.end - (it.start - it.queued));
  auto& lane = l.ids;
  // Items arrive in end order per thread; keep the lane sorted regardless.
  size_t pos = lane.size();
  while (pos > 0 && at(lane[pos - 1]).end > it.end) --pos;
  if (pos == lane.size()) {
    lane.push_back(id);
  } else {
    lane.insert(pos, id);
    l.disordered = true;  // ids no longer ascend along the lane
  }
  return id;
}

// Removes the evicted ids (below base_) from a lane; whether its ids still
// do not ascend.
bool Lineage::sweep(Ring<Id>& ids) const {
  size_t keep = 0;
  bool disordered = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < base_) continue;
    disordered = disordered || (keep > 0 && ids[keep - 1] > ids[i]);
    ids[keep++] = ids[i];
  }
  ids.truncate(keep);
  return disordered;
}

bool Lineage::add_read(const Ev& e) {
  const StorageRead& io = e.io();
  if (io.sample == 0) return false;
  const Id id = add({e.start, e.end, static_cast<int64_t>(io.queued_ns), io.sample, e.corr,
                     e.track, 1, true});
  by_sample_.add(io.sample, id);
  if (e.corr != 0) reads_by_batch_.add(e.corr, id);
  return true;
}

bool Lineage::add_preprocess(const Ev& e) {
  const Work& w = e.work();
  if (w.sample == 0) return false;
  const uint32_t n = std::clamp<uint32_t>(w.count, 1, kMaxIndexedSamples);
  const Id id = add({e.start, e.end, 0, w.sample, w.batch, e.track, static_cast<uint16_t>(n), false});
  // A group covers consecutive entries of its batch's sample list (shuffled
  // ids, so not consecutive ids): the rest are indexed when the batch's
  // list arrives (add_batch). Without a batch id, consecutive ids.
  if (w.batch != 0) {
    by_sample_.add(w.sample, id);
  } else {
    for (uint32_t i = 0; i < n; ++i) by_sample_.add(w.sample + i, id);
  }
  return true;
}

template <typename Fn>
void Lineage::for_samples(const Item& it, Fn&& fn) const {
  if (it.count > 1 && it.batch != 0) {
    if (auto pos = batch_pos_.find(it.batch); pos != batch_pos_.end() && pos->second >= batch_base_) {
      const auto& list = batches_[pos->second - batch_base_].samples;
      auto at = std::find(list.begin(), list.end(), it.sample);
      for (uint32_t k = 0; k < it.count && at != list.end(); ++k, ++at) fn(*at);
      return;
    }
  }
  for (uint32_t k = 0; k < it.count; ++k) fn(it.sample + k);
}

void Lineage::add_batch(uint64_t id, int64_t ready, std::span<const uint64_t> samples) {
  Batch b{id, ready, {samples.begin(), samples.end()}};
  auto pos = batches_.end();
  while (pos != batches_.begin() && (pos - 1)->ready > ready) --pos;
  const bool at_end = pos == batches_.end();
  batches_.insert(pos, std::move(b));
  if (at_end && id != 0) batch_pos_[id] = batch_base_ + batches_.size() - 1;
  if (!at_end) {  // rare: rebuild the positions behind the insertion point
    for (size_t i = 0; i < batches_.size(); ++i)
      if (batches_[i].id != 0) batch_pos_[batches_[i].id] = batch_base_ + i;
  }
  index_groups(id, samples);
}

// Indexes every sample of this batch's groups (known so far only by their
// first sample) under the group's item.
void Lineage::index_groups(uint64_t id, std::span<const uint64_t> samples) {
  if (id == 0) return;
  std::vector<std::pair<uint64_t, Id>> more;
  for (size_t i = 0; i < samples.size(); ++i) {
    by_sample_.for_each(samples[i], base_, [&](Id pid) {
      const Item& it = at(pid);
      if (it.read || it.batch != id || it.sample != samples[i]) return;
      for (size_t k = 1; k < it.count && i + k < samples.size(); ++k)
        more.emplace_back(samples[i + k], pid);
    });
  }
  for (const auto& [sample, pid] : more) by_sample_.add(sample, pid);
}

const Batch* Lineage::batch_for(uint64_t id, int64_t wait_start, int64_t wait_end) const {
  if (id != 0) {
    auto it = batch_pos_.find(id);
    if (it != batch_pos_.end() && it->second >= batch_base_) return &batches_[it->second - batch_base_];
  }
  auto it = std::upper_bound(batches_.begin(), batches_.end(), wait_end,
                             [](int64_t t, const Batch& b) { return t < b.ready; });
  if (it == batches_.begin()) return nullptr;
  --it;
  return it->ready >= wait_start ? &*it : nullptr;
}

// Ties go to the item met first (the newest), and `best` keeps a tie.
Lineage::Id Lineage::last_done(uint64_t sample, bool read, int64_t t, Id best) const {
  Id found = kNone;
  by_sample_.for_each(sample, base_, [&](Id id) {
    const Item& it = at(id);
    if (it.read == read && it.end <= t) found = later(found, id);
  });
  return found == kNone ? best : later(best, found);
}

// One pass over the sample's list, with the result of last_done for the
// reads and then for the preprocessing.
Lineage::Id Lineage::last_done_both(uint64_t sample, int64_t t, Id best) const {
  Id read = kNone, pre = kNone;
  by_sample_.for_each(sample, base_, [&](Id id) {
    const Item& it = at(id);
    if (it.end > t) return;
    Id& f = it.read ? read : pre;
    f = later(f, id);
  });
  if (read != kNone) best = later(best, read);
  if (pre != kNone) best = later(best, pre);
  return best;
}

Lineage::Id Lineage::lane_prev(uint32_t track, int64_t t) const {
  if (track >= lanes_.size()) return kNone;
  const Lane& l = lanes_[track];
  const auto& ids = l.ids;
  // The upper bound of t among the ends. Along a walk t only decreases, so
  // it lies at or before the previous answer on this lane (the hint), and
  // usually just before it: a few steps back, else a binary search.
  size_t hi = std::min(l.hint, ids.size());
  for (int step = 0; step < 8 && hi > 0 && t < at(ids[hi - 1]).end; ++step) --hi;
  size_t lo = 0;
  if (hi > 0 && t < at(ids[hi - 1]).end) {
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (t < at(ids[mid]).end) hi = mid; else lo = mid + 1;
    }
  } else {
    lo = hi;
  }
  l.hint = lo;
  while (lo > 0) {
    --lo;
    if (ids[lo] >= base_) return ids[lo];
  }
  return kNone;
}

// The predecessor of `node` that finished last at or before t: the same
// thread's previous item, or for preprocessing its own samples' reads and
// earlier preprocessing (a collate waits for the batch's transforms).
Lineage::Id Lineage::pred_of(Id node, int64_t t) const {
  const Item& it = at(node);
  Id best = lane_prev(it.track, t);
  if (it.read) return best;
  for_samples(it, [&](uint64_t s) {
    best = last_done_both(s, t, best);
  });
  // A pipeline that starts a batch's preprocessing once the whole batch is
  // read (stallscope's loader) waits for the batch's last read, not only
  // for the item's own samples: an idle worker was not what it waited for.
  if (it.batch != 0) {
    reads_by_batch_.for_each(it.batch, base_, [&](Id id) {
      if (at(id).end <= t) best = later(best, id);
    });
  }
  return best;
}

// The last item of the batch to finish: its samples' preprocessing, else reads.
Lineage::Id Lineage::collate_pred(const Batch& b) const {
  Id best = kNone;
  for (uint64_t s : b.samples) best = last_done(s, false, b.ready, best);
  if (best != kNone) return best;
  for (uint64_t s : b.samples) best = last_done(s, true, b.ready, best);
  return best;
}

void Lineage::walk(const Batch& b, int64_t stop, std::vector<ChainSeg>& out) const {
  out.clear();
  for (const Lane& l : lanes_) l.hint = SIZE_MAX;  // lane_prev: no earlier answer
  Id node = collate_pred(b);
  if (node == kNone) return;
  out.push_back({at(node).end, b.ready, false});  // collate and hand-over
  for (size_t guard = 0; node != kNone && guard < 100000; ++guard) {
    const Item& it = at(node);
    const int64_t begin = it.start - it.queued;
    out.push_back({it.start, it.end, it.read});
    if (it.queued > 0) out.push_back({begin, it.start, true});
    if (begin <= stop) break;
    const Id pred = pred_of(node, begin);
    // The gap before an item: waiting for a worker (preprocessing) or for
    // submission (storage); with no predecessor it reaches back to `stop`.
    const int64_t from = pred == kNone ? stop : at(pred).end;
    out.push_back({from, begin, it.read});
    node = pred;
  }
}

void Lineage::collect_busy(int64_t a, int64_t b, Ivs& reads, Ivs& pre) const {
  collect_busy_tracks(a, b, [&](uint32_t, bool read, int64_t x, int64_t y) { (read ? reads : pre).push_back({x, y}); });
}

void Lineage::collect_busy_tracks(int64_t a, int64_t b,
                                  const std::function<void(uint32_t, bool, int64_t, int64_t)>& fn) const {
  for (size_t track = 0; track < lanes_.size(); ++track) {
    const Lane& l = lanes_[track];
    const auto& ids = l.ids;
    size_t lo = 0, hi = ids.size();  // the first item ending after a
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (at(ids[mid]).end <= a) lo = mid + 1; else hi = mid;
    }
    // Sorted by end: once end - max_len >= b, no later item begins before b.
    for (size_t i = lo; i < ids.size(); ++i) {
      const Item& it = at(ids[i]);
      if (it.end - l.max_len >= b) break;
      const int64_t begin = it.start - it.queued;
      if (begin < b) fn(static_cast<uint32_t>(track), it.read, std::max(begin, a), std::min(it.end, b));
    }
  }
}

void Lineage::evict_before(int64_t t) {
  const Id first = base_;
  // Popping while the front item ended before t: whole runs below a mark
  // whose items all ended before t, then one by one.
  Id upto = base_;
  while (!marks_.empty() && (marks_.front().upto <= base_ || marks_.front().max_end < t)) {
    upto = std::max(upto, marks_.front().upto);
    marks_.pop_front();
  }
  items_.pop_front(static_cast<size_t>(upto - base_));
  base_ = upto;
  while (!items_.empty() && items_.front().end < t) {
    items_.pop_front();
    ++base_;
  }
  // The evicted items are the ids [first, base_): a prefix of each lane
  // whose ids ascend; a lane with an item inserted out of order is swept.
  if (base_ != first) {
    for (Lane& l : lanes_) {
      auto& ids = l.ids;
      if (!l.disordered) {  // ids ascend: the evicted ones are a prefix
        ids.pop_front(ids.partition_point([&](Id x) { return x < base_; }));
        continue;
      }
      while (!ids.empty() && ids.front() < base_) ids.pop_front();
      l.disordered = sweep(ids);
    }
  }
  by_sample_.evict(base_);
  reads_by_batch_.evict(base_);
  while (!batches_.empty() && batches_.front().ready < t) {
    if (batches_.front().id != 0) batch_pos_.erase(batches_.front().id);
    batches_.pop_front();
    ++batch_base_;
  }
}

}  // namespace stallscope::analyzer
