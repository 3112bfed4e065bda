#include "step_finder.hpp"

#include <algorithm>
#include <cctype>

namespace stallscope::analyzer {

namespace {

// "ProfilerStep#12" -> 12; no trailing digits -> fallback.
uint64_t trailing_index(const std::string& name, uint64_t fallback) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  if (i == name.size() || name.size() - i > 18) return fallback;
  return std::stoull(name.substr(i));
}

// Range names of one family share this: the name without trailing digits.
std::string name_class(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  return name.substr(0, i);
}

void insert_sorted(std::vector<StepCand>& v, const StepCand& c) {
  auto pos = v.end();
  while (pos != v.begin() && (pos - 1)->start > c.start) --pos;
  v.insert(pos, c);
}

}  // namespace

StepFinder::StepFinder(const RankTrace& trace, const std::regex& pattern)
    : trace_(trace), pattern_(pattern) {}

void StepFinder::on_event(const Ev& e) {
  switch (e.kind) {
    case Kind::kStep: on_step(e); break;
    case Kind::kRange: on_phase_range(e); on_range(e); break;
    case Kind::kDataWait: on_wait(e); break;
    case Kind::kChannelHandoff: on_handoff(e); break;
    default: break;
  }
}

void StepFinder::accept(const StepCand& c) {
  if (!decided_) return;
  insert_sorted(ready_, c);
}

void StepFinder::on_step(const Ev& e) {
  if (decided_ && (source_ != StepSource::kStepEvents || e.track != trainer_)) return;
  auto& open = open_steps_[e.track];
  if (e.phase == format::kComplete) {
    StepCand c{e.corr, e.start, e.end, e.track, false};
    decided_ ? accept(c) : steps_[e.track].push_back(c);
  } else if (e.phase == format::kBegin) {
    if (!open.empty()) {  // a begin while one is open: its end was lost
      StepCand c{open.back().index, open.back().start, e.start, e.track, true};
      decided_ ? accept(c) : steps_[e.track].push_back(c);
      open.clear();
    }
    open.push_back({e.corr, e.start, 0});
  } else if (e.phase == format::kEnd) {
    if (open.empty() || open.back().index != e.corr) {
      ++unmatched_ends_;
      return;
    }
    StepCand c{open.back().index, open.back().start, e.start, e.track, false};
    open.pop_back();
    decided_ ? accept(c) : steps_[e.track].push_back(c);
  }
}

void StepFinder::on_range(const Ev& e) {
  if (decided_ && (source_ != StepSource::kRanges || e.track != trainer_)) return;
  if (e.phase == format::kComplete) {
    add_range(e.track, e.name, e.start, e.end);
  } else if (e.phase == format::kBegin) {
    open_ranges_[e.track].push_back({0, e.start, e.name});
  } else if (e.phase == format::kEnd) {
    auto& st = open_ranges_[e.track];
    if (st.empty()) return;
    const Open o = st.back();
    st.pop_back();
    add_range(e.track, o.name, o.start, e.start);
  }
}

void StepFinder::add_range(uint32_t track, uint32_t name, int64_t a, int64_t b) {
  auto [it, fresh] = name_matches_.try_emplace(name, false);
  const std::string& text = trace_.names[name];
  if (fresh) it->second = std::regex_search(text, pattern_);
  if (!it->second) return;
  if (decided_) {
    if (name_class(text) != detail_) return;  // a nested range of another family
    accept({trailing_index(text, ready_.size()), a, b, track, false});
    return;
  }
  auto& v = ranges_[track];
  if (!v.empty() && v.back().start <= a && b <= v.back().end) return;  // nested inside
  while (!v.empty() && a <= v.back().start && v.back().end <= b) v.pop_back();  // outer arrives
  if (v.empty()) range_class_[track] = name_class(text);
  v.push_back({trailing_index(text, v.size()), a, b, track, false});
}

bool StepFinder::in_phase(uint32_t track) const {
  auto it = range_names_.find(track);
  if (it == range_names_.end()) return false;
  for (uint32_t n : it->second)
    if (trace_.names[n].rfind("phase:", 0) == 0) return true;
  return false;
}

// An evaluation loop (the hooks' begin/end phase:eval range on the trainer
// thread) is no step: with steps from data waits, the step before it ends
// where it begins, and its own waits open none.
void StepFinder::on_phase_range(const Ev& e) {
  auto& st = range_names_[e.track];
  if (e.phase == format::kBegin) {
    if (st.size() >= 64) return;
    const bool phase = e.name < trace_.names.size() && trace_.names[e.name].rfind("phase:", 0) == 0;
    if (phase && !in_phase(e.track)) {
      auto last = last_wait_start_.find(e.track);
      if (last != last_wait_start_.end() && e.start > last->second &&
          (!decided_ || (source_ == StepSource::kDataWaits && e.track == trainer_))) {
        StepCand c{wait_count_[e.track] - 1, last->second, e.start, e.track, false};
        decided_ ? accept(c) : waits_[e.track].push_back(c);
      }
      if (last != last_wait_start_.end()) last_wait_start_.erase(last);
      auto h = last_handoff_step_.find(e.track);
      if (h != last_handoff_step_.end() && e.start > h->second &&
          (!decided_ || (source_ == StepSource::kHandoffs && e.track == trainer_))) {
        StepCand c{handoff_steps_[e.track] - 1, h->second, e.start, e.track, false};
        if (decided_) accept(c);
      }
      if (h != last_handoff_step_.end()) last_handoff_step_.erase(h);
    }
    st.push_back(e.name < trace_.names.size() ? e.name : 0);
  } else if (e.phase == format::kEnd && !st.empty()) {
    st.pop_back();
  }
}

void StepFinder::on_wait(const Ev& e) {
  if (e.phase != format::kComplete) return;
  if (in_phase(e.track)) return;
  ++wait_count_[e.track];
  add_wait_step(e.track, e.start);
}

void StepFinder::add_wait_step(uint32_t track, int64_t a) {
  if (decided_ && (source_ != StepSource::kDataWaits || track != trainer_)) return;
  auto last = last_wait_start_.find(track);
  if (last != last_wait_start_.end() && a > last->second) {
    StepCand c{wait_count_[track] - 2, last->second, a, track, false};
    decided_ ? accept(c) : waits_[track].push_back(c);
  }
  last_wait_start_[track] = a;
}

// Every hand-off to a thread may open a step: the first of a group taken
// together (see handoff_gap) does. Before deciding only the times are kept;
// the steps are made from them once the gap is known.
void StepFinder::on_handoff(const Ev& e) {
  const auto& h = e.channel();
  const std::pair<uint64_t, uint64_t> pair{uint64_t{h.producer_pid} << 32 | h.producer_tid,
                                           thread_key(e.track)};
  if (auto it = handing_.find(pair); it != handing_.end()) {
    ++it->second;
  } else if (handing_.size() < kMaxKeptHandoffs) {
    handing_.emplace(pair, 1);
  }
  if (in_phase(e.track)) return;
  const int64_t asked = h.asked_ns > 0 && h.asked_ns <= e.end ? h.asked_ns : e.end;
  if (!decided_) {
    auto& v = handoff_times_[e.track];
    if (v.size() < kMaxKeptHandoffs) v.push_back({asked, e.end});
    return;
  }
  if (source_ == StepSource::kHandoffs && e.track == trainer_) add_handoff_step(e.track, asked, e.end);
}

void StepFinder::add_handoff_step(uint32_t track, int64_t asked, int64_t got) {
  auto last = last_got_.find(track);
  const bool opens = last == last_got_.end() || asked - last->second >= handoff_gap_;
  if (last == last_got_.end() || got > last->second) last_got_[track] = got;
  if (!opens) return;
  auto open = last_handoff_step_.find(track);
  if (open != last_handoff_step_.end() && asked > open->second)
    accept({handoff_steps_[track] - 1, open->second, asked, track, false});
  ++handoff_steps_[track];
  last_handoff_step_[track] = asked;
}

int64_t StepFinder::handoff_gap(uint32_t track) const {
  auto it = handoff_times_.find(track);
  if (it == handoff_times_.end() || it->second.size() < 4) return 0;
  std::vector<std::pair<int64_t, int64_t>> t = it->second;
  std::sort(t.begin(), t.end());
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(std::max<int64_t>(t[i].first - t[i - 1].second, 0));
  std::sort(gaps.begin(), gaps.end());
  // The largest ratio between neighbouring sorted gaps; a step holds several
  // hand-offs only when it is a clear jump (x4) from gaps under 2 ms and
  // the long gaps recur (at least 3 of them).
  constexpr int64_t kTogether = 2'000'000;
  double best = 0;
  size_t at = 0;
  for (size_t i = 1; i + 2 < gaps.size(); ++i) {
    if (gaps[i - 1] > kTogether) break;
    const double lo = double(std::max<int64_t>(gaps[i - 1], 1000));  // 1 µs floor
    const double r = double(gaps[i]) / lo;
    if (r > best) {
      best = r;
      at = i;
    }
  }
  if (best < 4 || at == 0) return 0;
  const int64_t cut = (gaps[at - 1] + gaps[at]) / 2;
  // Taken together means the same number of objects every time (inputs
  // and labels): at least 80 % of the groups the cut makes have one size.
  // A trainer whose gets are merely uneven (preempted now and then) makes
  // groups of every size, and each of its gets opens a step.
  std::map<size_t, size_t> sizes;
  size_t n = 1, groups = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    if (std::max<int64_t>(t[i].first - t[i - 1].second, 0) >= cut) {
      ++sizes[n];
      ++groups;
      n = 1;
    } else {
      ++n;
    }
  }
  size_t common = 0, k = 1;
  for (const auto& [size, count] : sizes)
    if (count > common) {
      common = count;
      k = size;
    }
  if (k < 2 || groups < 3 || 5 * common < 4 * groups) return 0;
  return cut;
}

uint32_t StepFinder::busiest(const std::map<uint32_t, std::vector<StepCand>>& by_track) const {
  uint32_t best = 0;
  size_t n = 0;
  for (const auto& [track, v] : by_track) {
    if (v.size() > n) {
      n = v.size();
      best = track;
    }
  }
  return best;
}

uint64_t StepFinder::thread_key(uint32_t track) const {
  if (track >= trace_.tracks.size()) return 0;
  const TrackDesc& td = trace_.tracks[track];
  return uint64_t{td.proc < trace_.procs.size() ? trace_.procs[td.proc].pid : 0} << 32 | td.tid;
}

// The thread whose hand-offs make steps: among the consumers, not one that
// hands objects on to a third thread (a relay: Pool.imap's result thread;
// at least a quarter as many as it receives, so that a trainer that handed
// its pool one task list is none),
// the process's main thread where it has at least half as many as the
// busiest (a bounded queue's producer waits for free slots the trainer
// signals: it is a consumer too), else the busiest; with at least as many
// hand-offs as it has data waits (a relay's own waits, on the workers'
// queue, do not count). kNoTrack when none qualifies.
uint32_t StepFinder::handoff_consumer() const {
  auto relays = [&](uint64_t key, size_t received) {
    uint64_t on = 0;
    for (auto it = handing_.lower_bound({key, 0}); it != handing_.end() && it->first.first == key;
         ++it) {
      // Handing to a thread that does not hand back to it.
      if (handing_.count({it->first.second, key}) == 0) on += it->second;
    }
    return on >= 2 && 4 * on >= received;
  };
  uint32_t best = kNoTrack, main = kNoTrack;
  size_t n = 0, n_main = 0;
  for (const auto& [track, v] : handoff_times_) {
    if (track >= trace_.tracks.size() || v.size() < 2) continue;
    const uint64_t key = thread_key(track);
    if (relays(key, v.size())) continue;
    if (v.size() > n) {
      n = v.size();
      best = track;
    }
    if ((key >> 32) == (key & 0xffffffffu) && v.size() > n_main) {
      n_main = v.size();
      main = track;
    }
  }
  if (main != kNoTrack && 2 * n_main >= n) {
    best = main;
    n = n_main;
  }
  if (best == kNoTrack) return kNoTrack;
  auto w = waits_.find(best);
  const size_t waits = w == waits_.end() ? 0 : w->second.size();
  return n + 1 >= waits ? best : kNoTrack;
}

void StepFinder::decide() {
  if (decided_) return;
  auto has_any = [](const auto& m) {
    return std::any_of(m.begin(), m.end(), [](const auto& kv) { return !kv.second.empty(); });
  };
  const std::map<uint32_t, std::vector<StepCand>>* chosen = nullptr;
  if (has_any(steps_) || has_any(open_steps_)) {
    source_ = StepSource::kStepEvents;
    chosen = &steps_;
    detail_ = "step events";
  } else if (has_any(ranges_)) {
    source_ = StepSource::kRanges;
    chosen = &ranges_;
  } else if (const uint32_t h = handoff_consumer(); h != kNoTrack) {
    // Hand-offs rather than data waits when the thread waiting most gets an
    // object at every iteration: its waits are a subset (a trainer that
    // waits now and then would see steps of several iterations).
    source_ = StepSource::kHandoffs;
    trainer_ = h;
    handoff_gap_ = handoff_gap(h);
    detail_ = handoff_gap_ > 0 ? "hand-offs to the trainer thread, a step per group taken together"
                               : "hand-offs to the trainer thread";
    has_trainer_ = decided_ = true;
    auto times = std::move(handoff_times_[h]);
    std::sort(times.begin(), times.end());
    for (const auto& [asked, got] : times) add_handoff_step(h, asked, got);
    steps_.clear();
    ranges_.clear();
    waits_.clear();
    handoff_times_.clear();
    return;
  } else if (has_any(waits_)) {
    source_ = StepSource::kDataWaits;
    chosen = &waits_;
    detail_ = "period of the trainer thread's data waits";
  } else {
    return;  // nothing yet: decide later
  }
  trainer_ = busiest(*chosen);
  if (source_ == StepSource::kStepEvents && steps_[trainer_].empty()) {
    for (const auto& [track, v] : open_steps_) if (!v.empty()) trainer_ = track;
  }
  if (source_ == StepSource::kRanges) detail_ = range_class_[trainer_];
  has_trainer_ = decided_ = true;
  auto it = chosen->find(trainer_);
  if (it != chosen->end()) for (const auto& c : it->second) insert_sorted(ready_, c);
  steps_.clear();
  ranges_.clear();
  waits_.clear();
}

size_t StepFinder::ready_count(int64_t t) const {
  size_t n = 0;
  while (n < ready_.size() && ready_[n].end <= t) ++n;
  return n;
}

std::vector<StepCand> StepFinder::pop_ready(int64_t t) {
  size_t n = 0;
  while (n < ready_.size() && ready_[n].end <= t) ++n;
  std::vector<StepCand> out(ready_.begin(), ready_.begin() + static_cast<long>(n));
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<long>(n));
  return out;
}

void StepFinder::finish(int64_t last_ns, int64_t window_first, int64_t window_last) {
  decide();
  if (!decided_ && window_last > window_first) {
    // Nothing marks steps: one window rather than an empty report.
    uint32_t main = kNoTrack;
    for (uint32_t t = 0; t < trace_.tracks.size(); ++t) {
      const TrackDesc& td = trace_.tracks[t];
      if (td.type != TrackType::kThread || td.proc >= trace_.procs.size()) continue;
      if (main == kNoTrack) main = t;
      if (td.proc == 0 && td.tid == trace_.procs[0].pid) {
        main = t;
        break;
      }
    }
    if (main == kNoTrack) return;
    source_ = StepSource::kWholeTrace;
    detail_ = "nothing delimits steps: the whole trace is one window";
    trainer_ = main;
    has_trainer_ = decided_ = true;
    accept({0, window_first, window_last, main, false});
    return;
  }
  if (source_ == StepSource::kHandoffs) {
    auto open = last_handoff_step_.find(trainer_);
    if (open != last_handoff_step_.end() && last_ns > open->second)
      accept({handoff_steps_[trainer_] - 1, open->second, last_ns, trainer_, true});
    last_handoff_step_.clear();
    return;
  }
  if (source_ == StepSource::kDataWaits) {
    // The last wait opens a step no later wait closes: it runs to the end
    // of the input (a partial step, marked like other analyzer-closed ones).
    auto last = last_wait_start_.find(trainer_);
    if (last != last_wait_start_.end() && last_ns > last->second)
      accept({wait_count_[trainer_] - 1, last->second, last_ns, trainer_, true});
    last_wait_start_.clear();
    return;
  }
  if (source_ != StepSource::kStepEvents) return;
  for (auto& [track, open] : open_steps_) {
    if (track != trainer_) continue;
    for (const auto& o : open) {
      if (last_ns > o.start) accept({o.index, o.start, last_ns, track, true});
    }
    open.clear();
  }
}

}  // namespace stallscope::analyzer
