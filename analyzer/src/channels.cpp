#include "channels.hpp"

#include <algorithm>

namespace stallscope::analyzer {

void Channel::sort_runs(size_t from) {
  sort_by_start_runs(pending_.data() + from, pending_.size() - from, scratch_, cuts_);
}

void Channel::prepare() {
  // Only what arrived since the last call is sorted, then merged in from
  // the back: the sorted part moves only where new intervals start before
  // its end.
  const size_t mid = std::max(sorted_, cursor_);
  sort_runs(mid);
  sorted_ = pending_.size();
  if (mid == cursor_ || mid == pending_.size() || pending_[mid - 1].a <= pending_[mid].a) return;
  scratch_.assign(pending_.begin() + static_cast<long>(mid), pending_.end());
  size_t i = mid, k = pending_.size(), j = scratch_.size();
  while (j > 0) {
    if (i > cursor_ && pending_[i - 1].a > scratch_[j - 1].a) {
      pending_[--k] = pending_[--i];
    } else {
      pending_[--k] = scratch_[--j];
    }
  }
}

void Channel::take(int64_t s, int64_t e, Ivs& out) {
  out.clear();
  size_t until = cursor_;  // the intervals starting before e
  while (until < pending_.size() && pending_[until].a < e) ++until;
  out.reserve(carry_.size() + (until - cursor_));
  size_t keep = 0;
  for (const Iv& c : carry_) {
    if (c.b <= s) continue;
    append(out, std::max(c.a, s), std::min(c.b, e));
    if (c.b > e) carry_[keep++] = c;
  }
  carry_.resize(keep);
  while (cursor_ < pending_.size() && pending_[cursor_].a < e) {
    const Iv iv = pending_[cursor_++];
    if (iv.b <= s) continue;
    append(out, std::max(iv.a, s), std::min(iv.b, e));
    if (iv.b > e) carry_.push_back(iv);
  }
  normalize(out);
}

void Channel::skip(int64_t s, int64_t e) {
  size_t keep = 0;
  for (const Iv& c : carry_)
    if (c.b > s && c.b > e) carry_[keep++] = c;
  carry_.resize(keep);
  while (cursor_ < pending_.size() && pending_[cursor_].a < e) {
    const Iv iv = pending_[cursor_++];
    if (iv.b > s && iv.b > e) carry_.push_back(iv);
  }
}

void Channel::trim() {
  // Compacts only when the consumed prefix is the larger part: erasing the
  // front on every batch of steps would move the whole window each time.
  if (cursor_ * 2 < pending_.size()) return;
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(cursor_));
  sorted_ = sorted_ > cursor_ ? sorted_ - cursor_ : 0;
  cursor_ = 0;
}

void Channel::drop_before(int64_t t) {
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(cursor_));
  cursor_ = 0;
  std::erase_if(pending_, [t](const Iv& v) { return v.b < t; });
  sorted_ = 0;
  std::erase_if(carry_, [t](const Iv& v) { return v.b < t; });
}

namespace {

// Moves the activities of [cursor, n) starting before e out of `v`, and
// those of `carry` still open: clipped into `out`; what reaches past e
// stays in `carry`.
void take_activities(const HostActivity* v, size_t n, size_t& cursor,
                     std::vector<HostActivity>& carry, int64_t s, int64_t e,
                     std::vector<HostActivity>& out) {
  auto clip = [&](const HostActivity& x) {  // (a clipped copy on the stack: a stalled reload)
    HostActivity& c = out.emplace_back(x);
    c.a = std::max(c.a, s);
    c.b = std::min(c.b, e);
  };
  size_t keep = 0;
  for (const HostActivity& x : carry) {
    if (x.b <= s) continue;
    if (x.a < e) clip(x);
    if (x.b > e) carry[keep++] = x;
  }
  carry.resize(keep);
  for (; cursor < n && v[cursor].a < e; ++cursor) {
    const HostActivity& x = v[cursor];
    if (x.b <= s) continue;
    clip(x);
    if (x.b > e) carry.push_back(x);
  }
}

}  // namespace

void ActivityChannel::prepare() {
  // Only what arrived since the last call is sorted, then merged into the
  // sorted rest: the order a stable sort of everything not taken gives
  // (ties stay in arrival order), without moving the sorted part each batch.
  const auto by_start = [](const HostActivity& x, const HostActivity& y) { return x.a < y.a; };
  const auto first = pending_.begin() + static_cast<long>(cursor_);
  const auto mid = pending_.begin() + static_cast<long>(std::max(sorted_, cursor_));
  if (!std::is_sorted(mid, pending_.end(), by_start)) std::stable_sort(mid, pending_.end(), by_start);
  if (first != mid && mid != pending_.end() && by_start(*mid, *(mid - 1)))
    std::inplace_merge(first, mid, pending_.end(), by_start);
  sorted_ = pending_.size();
}

void ActivityChannel::take(int64_t s, int64_t e, std::vector<HostActivity>& out) {
  take_activities(pending_.data(), pending_.size(), cursor_, carry_, s, e, out);
}

void ActivityChannel::trim() {
  if (cursor_ * 2 < pending_.size()) return;
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(cursor_));
  sorted_ = sorted_ > cursor_ ? sorted_ - cursor_ : 0;
  cursor_ = 0;
}

void ActivityChannel::drop_before(int64_t t) {
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(cursor_));
  cursor_ = 0;
  sorted_ = 0;
  std::erase_if(pending_, [t](const HostActivity& x) { return x.b < t; });
  std::erase_if(carry_, [t](const HostActivity& x) { return x.b < t; });
}

void ActivityWindow::take(const std::vector<HostActivity>& src, int64_t s, int64_t e,
                          std::vector<HostActivity>& out) {
  if (s < last_s_) {  // a step out of order: start over
    cursor_ = 0;
    carry_.clear();
  }
  last_s_ = s;
  take_activities(src.data(), src.size(), cursor_, carry_, s, e, out);
}

void LaneChannel::insert_sorted(Lane& l, const Iv& v) {
  // Out of end order (an asynchronous read that completed early): into its
  // place, never before the cursor.
  auto pos = std::upper_bound(l.ivs.begin() + static_cast<long>(l.cursor), l.ivs.end(), v.b,
                              [](int64_t b, const Iv& x) { return b < x.b; });
  l.ivs.insert(pos, v);
}

void LaneChannel::take(int64_t s, int64_t e, Ivs& out) const {
  out.clear();
  collect(s, e, out);
  // One ascending run per track (a thread's intervals rarely overlap): merged.
  sort_by_start_runs(out.data(), out.size(), scratch_, cuts_);
  normalize(out);
}

void LaneChannel::collect(int64_t s, int64_t e, Ivs& out) const {
  for (const Lane& l : lanes_) {
    auto it = std::upper_bound(l.ivs.begin() + static_cast<long>(l.cursor), l.ivs.end(), s,
                               [](int64_t t, const Iv& x) { return t < x.b; });
    // Sorted by end: once b - max_len >= e, no later interval starts before e.
    for (; it != l.ivs.end() && it->b - l.max_len < e; ++it)
      if (it->a < e) append(out, std::max(it->a, s), std::min(it->b, e));
  }
}

void LaneChannel::drop_before(int64_t t) {
  for (Lane& l : lanes_) {
    while (l.cursor < l.ivs.size() && l.ivs[l.cursor].b <= t) ++l.cursor;
    // Compacted once the dropped prefix is the larger part (amortized O(1)).
    if (l.cursor * 2 >= l.ivs.size() && l.cursor > 0) {
      l.ivs.erase(l.ivs.begin(), l.ivs.begin() + static_cast<long>(l.cursor));
      l.cursor = 0;
    }
  }
}

size_t LaneChannel::size() const noexcept {
  size_t n = 0;
  for (const Lane& l : lanes_) n += l.ivs.size() - l.cursor;
  return n;
}

void RateSeries::push(const Seg& s) {
  // Zero is a value (no idle CPU, a thread that did not run), not "unknown".
  if (s.b > s.a && s.v >= 0) segs_.push_back(s);
}

void RateSeries::add_cumulative(int64_t t, double total, int64_t period_ns) {
  if (!have_) {
    have_ = true;
    first_total_ = total;
    first_t_ = t;
  } else if (t > last_t_ && total >= last_total_) {
    const int64_t a = std::max(last_t_, t - period_ns);
    push({a, t, (total - last_total_) / static_cast<double>(t - a)});
  }
  last_t_ = std::max(last_t_, t);
  last_total_ = std::max(last_total_, total);
}

void RateSeries::add_level(int64_t t, double value) {
  if (have_ && t > last_t_) push({last_t_, t, value});
  have_ = true;
  last_t_ = t;
}

double RateSeries::integrate(const Ivs& set) const {
  double sum = 0;
  auto it = std::lower_bound(segs_.begin(), segs_.end(), set.empty() ? 0 : set.front().a,
                             [](const Seg& s, int64_t t) { return s.b <= t; });
  for (; it != segs_.end(); ++it) {
    if (!set.empty() && it->a >= set.back().b) break;
    sum += it->v * static_cast<double>(overlap(set, it->a, it->b));
  }
  return sum;
}

int64_t RateSeries::covered(const Ivs& set) const {
  int64_t sum = 0;
  for (const Seg& s : segs_) sum += overlap(set, s.a, s.b);
  return sum;
}

void RateSeries::drop_before(int64_t t) {
  while (!segs_.empty() && segs_.front().b < t) segs_.pop_front();
}

}  // namespace stallscope::analyzer
