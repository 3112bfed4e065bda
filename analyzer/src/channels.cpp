#include "channels.hpp"

#include <algorithm>

namespace stallscope::analyzer {

namespace {

bool by_start(const Iv& l, const Iv& r) { return l.a < r.a; }

// Sorts [first, last) by start. Intervals arrive as a few ascending runs
// (one per thread block of a chunk), so runs are found and merged pairwise:
// O(n log runs), and O(n) when the input is already sorted.
void sort_runs(std::vector<Iv>::iterator first, std::vector<Iv>::iterator last) {
  std::vector<std::vector<Iv>::iterator> cuts{first};
  for (auto it = first; it != last; ++it)
    if (it != first && by_start(*it, *(it - 1))) cuts.push_back(it);
  cuts.push_back(last);
  if (cuts.size() > 64) {  // not run-shaped: a plain sort is cheaper
    std::sort(first, last, by_start);
    return;
  }
  while (cuts.size() > 2) {
    std::vector<std::vector<Iv>::iterator> next{cuts.front()};
    for (size_t i = 0; i + 2 < cuts.size(); i += 2) {
      std::inplace_merge(cuts[i], cuts[i + 1], cuts[i + 2], by_start);
      next.push_back(cuts[i + 2]);
    }
    if (cuts.size() % 2 == 0) next.push_back(cuts.back());
    cuts.swap(next);
  }
}

}  // namespace

void Channel::prepare() {
  // Only what arrived since the last call is sorted, then merged in.
  const auto mid = pending_.begin() + static_cast<long>(std::max(sorted_, cursor_));
  sort_runs(mid, pending_.end());
  if (mid != pending_.begin() + static_cast<long>(cursor_) && mid != pending_.end() &&
      by_start(*mid, *(mid - 1)))
    std::inplace_merge(pending_.begin() + static_cast<long>(cursor_), mid, pending_.end(), by_start);
  sorted_ = pending_.size();
}

void Channel::take(int64_t s, int64_t e, Ivs& out) {
  out.clear();
  size_t keep = 0;
  for (const Iv& c : carry_) {
    if (c.b <= s) continue;
    out.push_back({std::max(c.a, s), std::min(c.b, e)});
    if (c.b > e) carry_[keep++] = c;
  }
  carry_.resize(keep);
  while (cursor_ < pending_.size() && pending_[cursor_].a < e) {
    const Iv iv = pending_[cursor_++];
    if (iv.b <= s) continue;
    out.push_back({std::max(iv.a, s), std::min(iv.b, e)});
    if (iv.b > e) carry_.push_back(iv);
  }
  normalize(out);
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

void RateSeries::push(const Seg& s) {
  // Zero is a value (no idle CPU, a thread that did not run), not "unknown".
  if (s.b > s.a && s.v >= 0) segs_.push_back(s);
}

void RateSeries::add_cumulative(int64_t t, double total, int64_t period_ns) {
  if (!have_) {
    have_ = true;
    first_total_ = total;
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
