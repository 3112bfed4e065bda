// Begin/End pairing and slice nesting for the Chrome exporter.
//
// Records reach us in file order, which is roughly end order (a span is
// written when it closes), so a parent arrives after its children. A track's
// slices are kept as disjoint top-level intervals: a new slice may enclose
// some, nest in one, or sit beside them; one that crosses a placed slice
// cannot be drawn as "X" on that thread and is exported as an async pair.
#include <algorithm>

#include "reader/chrome_writer.hpp"

namespace stallscope::reader::detail {

namespace {
constexpr size_t kMaxStackDepth = 256;
constexpr size_t kMaxAsyncOpen = 65536;
}  // namespace

bool NestingLane::place(int64_t start, int64_t end) {
  // Roots overlapping [start, end): end > start and begin < end (touching is fine).
  auto lo = std::upper_bound(roots_.begin(), roots_.end(), start,
                             [](int64_t s, const auto& r) { return s < r.second; });
  auto hi = lo;
  while (hi != roots_.end() && hi->first < end) ++hi;
  if (start == end && lo != roots_.end() && lo->first <= start)
    return true;  // instant inside a root
  if (lo == hi) {
    roots_.insert(lo, {start, end});
  } else if (hi - lo == 1 && lo->first <= start && end <= lo->second) {
    return true;  // nested in one root (its inner slices are not tracked)
  } else if (start <= lo->first && (hi - 1)->second <= end) {
    *lo = {start, end};  // encloses every overlapping root: it becomes their parent
    roots_.erase(lo + 1, hi);
  } else {
    return false;
  }
  if (roots_.size() > kMaxRoots) roots_.erase(roots_.begin(), roots_.begin() + kMaxRoots / 2);
  return true;
}

TrackState& ChromeWriter::track(uint32_t id) {
  if (cached_ != nullptr && cached_id_ == id) return *cached_;
  cached_ = &tracks_[id];  // node-based map: the pointer stays valid
  cached_id_ = id;
  return *cached_;
}

void ChromeWriter::event(const TraceReader& r, const Event& e) {
  TrackState& t = track(e.track_id);
  t.last_ns = std::max(t.last_ns, e.end_ns());
  const auto kind = e.kind_enum();
  if (kind == format::Kind::kCounter) return counter(r, e);
  if (kind == format::Kind::kGap || kind == format::Kind::kMark || e.phase == format::kInstant)
    return instant(r, e);
  switch (e.phase) {
    case format::kBegin:
      return begin(r, e, t);
    case format::kEnd:
      return end(r, e, t);
    default:
      return slice(r, e, e.ids, e.ts_ns, e.end_ns());
  }
}

void ChromeWriter::begin(const TraceReader& r, const Event& e, TrackState& t) {
  Pending p{e, {e.ids.begin(), e.ids.end()}, {e.frames.begin(), e.frames.end()}, &r};
  if (e.async()) {
    if (async_open_.size() >= kMaxAsyncOpen) {
      ++dropped_begins_;
      return;
    }
    async_open_[{e.kind, e.corr}] = std::move(p);
    return;
  }
  if (t.open.size() >= kMaxStackDepth) {
    ++dropped_begins_;
    return;
  }
  t.open.push_back(std::move(p));
}

void ChromeWriter::end(const TraceReader& r, const Event& e, TrackState& t) {
  (void)r;
  if (e.async()) {
    auto it = async_open_.find({e.kind, e.corr});
    if (it == async_open_.end()) {
      ++unmatched_ends_;
      return;
    }
    emit_pending(it->second, e.ts_ns);
    async_open_.erase(it);
    return;
  }
  // The innermost open Begin of the same kind on this track.
  for (auto it = t.open.rbegin(); it != t.open.rend(); ++it) {
    if (it->e.kind != e.kind) continue;
    emit_pending(*it, e.ts_ns);
    t.open.erase(std::next(it).base());
    return;
  }
  ++unmatched_ends_;
}

void ChromeWriter::emit_pending(const Pending& p, int64_t end_ns) {
  Event e = p.e;
  e.ids = p.ids;
  e.frames = p.frames;
  slice(*p.reader, e, p.ids, e.ts_ns, std::max(end_ns, e.ts_ns));
}

void ChromeWriter::end_process(const std::string& who) {
  uint64_t closed = 0;
  // A capture window left open simply lasted until the end: no warning.
  const auto counts = [](const Pending& p) { return p.e.kind_enum() != format::Kind::kCapture; };
  for (auto& [id, t] : tracks_) {
    for (const auto& p : t.open) {
      emit_pending(p, t.last_ns);
      closed += counts(p);
    }
    t.open.clear();
  }
  for (const auto& [key, p] : async_open_) {
    auto it = tracks_.find(p.e.track_id);
    emit_pending(p, it != tracks_.end() ? it->second.last_ns : p.e.ts_ns);
    closed += counts(p);
  }
  async_open_.clear();
  if (closed > 0)
    res_.warnings.push_back(
        who + ": " + std::to_string(closed) +
        " begin records without an end were closed at their track's last timestamp");
  if (unmatched_ends_ > 0)
    res_.warnings.push_back(who + ": " + std::to_string(unmatched_ends_) +
                            " end records without a begin were ignored");
  if (dropped_begins_ > 0)
    res_.warnings.push_back(who + ": " + std::to_string(dropped_begins_) +
                            " begin records beyond the nesting limit were ignored");
  tracks_.clear();
  cached_ = nullptr;
  unmatched_ends_ = dropped_begins_ = 0;
}

}  // namespace stallscope::reader::detail
