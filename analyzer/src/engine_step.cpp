// Attribution of one finalized step: gathers its clipped intervals from the
// channels, runs the attribution core, and splits its data stall along the
// late batch's lineage (or, without lineage, from the producers' activity).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "engine.hpp"

namespace stallscope::analyzer {

namespace {

void append_ends(const Ivs& v, int64_t step_end, std::vector<int64_t>& out) {
  for (const Iv& x : v) if (x.b < step_end) out.push_back(x.b);
}

}  // namespace

int64_t RankEngine::trainer_cpu(const Ivs& set) const {
  auto it = thread_cpu_.find({trainer_proc_, trainer_tid_});
  if (it == thread_cpu_.end() || !it->second.has_samples()) return -1;
  return std::llround(it->second.integrate(set));
}

// The parent's reading of `proc`'s CPU time as a child's, when the parent is
// in this rank's trace and its sampler found `proc`; else nullptr.
const RateSeries* RankEngine::read_as_child(uint32_t proc) const {
  if (proc >= trace_.procs.size()) return nullptr;
  const ProcessDesc& p = trace_.procs[proc];
  for (uint32_t q = 0; q < trace_.procs.size(); ++q) {
    if (q == proc || trace_.procs[q].pid != p.ppid || trace_.procs[q].host != p.host) continue;
    const auto it = child_cpu_.find({q, p.pid});
    if (it != child_cpu_.end() && it->second.has_samples()) return &it->second;
  }
  return nullptr;
}

double RankEngine::producer_cpu(const Ivs& set) {
  // A forked worker's CPU time is read twice: by its own sampler, thread by
  // thread, and by its parent's, as a child. Counted once: from the parent
  // (every tick; a worker's own samples come every 100 ms) from the
  // parent's first reading on, from the worker's threads before it. The
  // trainer's own process is the exception: its threads are told apart.
  const RateSeries* trainer_as_child = read_as_child(trainer_proc_);
  double sum = 0;
  Ivs& early = split_.producer_early;
  for (const auto& [key, s] : thread_cpu_) {
    if (key.first == trainer_proc_) {
      if (key.second != trainer_tid_) sum += s.integrate(set);
      continue;
    }
    const RateSeries* parent = read_as_child(key.first);
    if (parent == nullptr) {
      sum += s.integrate(set);
      continue;
    }
    early.clear();  // the part of `set` before the parent's first reading
    for (const Iv& x : set) {
      if (x.a >= parent->first_t()) break;
      early.push_back({x.a, std::min(x.b, parent->first_t())});
    }
    if (!early.empty()) sum += s.integrate(early);
  }
  for (const auto& [key, s] : child_cpu_) {
    if (&s == trainer_as_child) continue;
    sum += s.integrate(set);
  }
  return sum;
}

// The trainer's CPU operators within [a, b) (a profiler trace's; none else).
void RankEngine::take_ops(int64_t a, int64_t b, StepInputs& in) const {
  const auto& ops = trace_.trainer_ops;
  in.ops_known = !ops.empty();
  in.cpu_ops.clear();
  auto it = std::partition_point(ops.begin(), ops.end(), [a](const auto& x) { return x.second <= a; });
  for (; it != ops.end() && it->first < b; ++it)
    in.cpu_ops.push_back({std::max(it->first, a), std::min(it->second, b)});
}

void RankEngine::finalize(const StepCand& c) {
  // The inputs' vectors are the previous step's, refilled: no allocation
  // per step once their capacity has grown.
  StepInputs& in = step_in_;
  in.start = c.start;
  in.end = c.end;
  {
    const Ivs whole{{c.start, c.end}};
    stats_.step_idle_integral += stats_.idle.integrate(whole);
    stats_.step_idle_covered += stats_.idle.covered(whole);
  }
  compute_.take(c.start, c.end, in.compute);
  comm_.take(c.start, c.end, in.comm);
  h2d_.take(c.start, c.end, in.h2d);
  other_.take(c.start, c.end, in.other);
  in.straggler.clear();
  in.data_waits.clear();
  in.api_calls.clear();
  in.sync_returns.clear();
  Ivs& tmp = step_tmp_;
  d2h_.take(c.start, c.end, tmp);
  append_ends(tmp, c.end, in.sync_returns);
  if (TrainerChans* tc = trainer_chans()) {
    tc->waits.take(c.start, c.end, in.data_waits);
    tc->api.take(c.start, c.end, in.api_calls);
    tc->sync.take(c.start, c.end, tmp);
    append_ends(tmp, c.end, in.sync_returns);
    std::sort(in.sync_returns.begin(), in.sync_returns.end());
  }
  in.device_activity = device_seen_;
  take_ops(c.start, c.end, in);
  loaders_.on_step(c.start, c.end);
  // The attribution's two phases, with the engine's answers between them:
  // the data stall's split (lineage, loaders), the trainer's CPU time.
  StepSets& sets = step_sets_;
  step_sets(in, sets);
  const DataSplit split = sets.stall.empty() ? DataSplit{} : split_stall(sets.stall, c.start, c.end);
  const int64_t cpu = sets.cpu.empty() ? 0 : trainer_cpu(sets.cpu);
  const StepParts p = step_parts(sets, split, cpu);
  collectives_.on_step(c.start, c.end, in.comm, in.compute);
  cpu_unknown_seen_ = cpu_unknown_seen_ || p.cpu_unknown;
  StepResult r;
  r.index = c.index;
  r.start_ns = c.start;
  r.end_ns = c.end;
  r.parts = p.parts;
  r.split = p.split;
  r.closed_by_analyzer = c.closed_by_analyzer;
  classify_gaps(c, r);
  steps_in_order_ = steps_in_order_ && r.start_ns >= last_step_start_;
  last_step_start_ = r.start_ns;
  steps_.push_back(r);
  steps_split_ |= r.split;
  steps_closed_ += r.closed_by_analyzer ? 1 : 0;
  step_walls_.add(r.wall());
  snapshot(in, r);
  finalized_until_ = std::max(finalized_until_, c.end);
}

namespace {

constexpr size_t kMaxLanes = 12;    // per group (device, producers)
constexpr size_t kMaxSpans = 2000;  // per lane

// A timeline's lanes being built: (track, kind) -> lane, in first-seen order.
struct TimelineLanes {
  std::vector<std::pair<uint64_t, Lane>> lanes;
  // `name()` is called only for a new lane: a label is formatted text, and
  // a lane gets thousands of spans.
  template <class Name>
  Lane& at(uint32_t track, size_t kind, Name&& name, const char* key) {
    const uint64_t k = uint64_t{track} << 8 | kind;
    for (auto& [x, l] : lanes)
      if (x == k) return l;
    lanes.push_back({k, Lane{name(), key, {}}});
    return lanes.back().second;
  }
};

// Sorted, touching spans merged, at most kMaxSpans.
void normalize_spans(Lane& l) {
  std::sort(l.spans.begin(), l.spans.end());
  size_t n = 0;
  for (const auto& v : l.spans) {
    if (n > 0 && v.first <= l.spans[n - 1].second)
      l.spans[n - 1].second = std::max(l.spans[n - 1].second, v.second);
    else
      l.spans[n++] = v;
  }
  l.spans.resize(std::min(n, kMaxSpans));
}

// Appends `b`'s lanes to `t`: beyond kMaxLanes, the least busy lanes are
// merged per kind into one lane each ("REST_NAME: KIND").
void finish_lanes(TimelineLanes& b, const char* rest_name, Timeline& t) {
  for (auto& [k, l] : b.lanes) normalize_spans(l);
  if (b.lanes.size() > kMaxLanes) {
    const auto busy = [](const Lane& l) {
      int64_t n = 0;
      for (const auto& [x, y] : l.spans) n += y - x;
      return n;
    };
    std::stable_sort(b.lanes.begin(), b.lanes.end(),
                     [&](const auto& x, const auto& y) { return busy(x.second) > busy(y.second); });
    std::vector<Lane> rest;
    for (size_t i = kMaxLanes; i < b.lanes.size(); ++i) {
      Lane& l = b.lanes[i].second;
      auto it = std::find_if(rest.begin(), rest.end(), [&](const Lane& x) { return x.kind == l.kind; });
      if (it == rest.end()) {
        rest.push_back(Lane{std::string(rest_name) + ": " + l.kind, l.kind, {}});
        it = rest.end() - 1;
      }
      it->spans.insert(it->spans.end(), l.spans.begin(), l.spans.end());
    }
    b.lanes.resize(kMaxLanes);
    for (Lane& l : rest) {
      normalize_spans(l);
      b.lanes.push_back({~uint64_t{0}, std::move(l)});
    }
  }
  for (auto& [k, l] : b.lanes) t.lanes.push_back(std::move(l));
}

}  // namespace

// Keeps the lanes of the longest step and of a recent typical one (wall
// within 10 % of the running mean), for the HTML timeline: one lane per
// device stream and kind, the trainer's data waits and API calls, and one
// lane per producer thread (or worker process) and kind. At most kMaxLanes
// lanes per kind group; the rest of a group is merged into one lane.
void RankEngine::snapshot(const StepInputs& in, const StepResult& r) {
  const double wall = double(r.wall());
  wall_sum_ += wall;
  const double mean = wall_sum_ / double(steps_.size());
  const bool longest = steps_.size() > 2 && wall > double(longest_.wall_ns);
  const bool typical = steps_.size() > 2 && std::abs(wall - mean) <= 0.1 * mean && steps_.size() % 50 == 3;
  if (!longest && !typical) return;
  Timeline t{longest ? "longest" : "typical", r.index, r.wall(), {}};
  device_lanes(in, r, t);
  const int64_t s0 = r.start_ns;
  const auto rel = [&](int64_t a, int64_t b) { return std::pair<int64_t, int64_t>{a - s0, b - s0}; };
  for (const auto& [ivs, name, kind] : {std::tuple{&in.data_waits, "trainer: data wait", "data wait"},
                                        std::tuple{&in.api_calls, "trainer: CUDA API", "api"}}) {
    if (ivs->empty()) continue;
    Lane l{name, kind, {}};
    for (size_t i = 0; i < ivs->size() && i < kMaxSpans; ++i) l.spans.push_back(rel((*ivs)[i].a, (*ivs)[i].b));
    t.lanes.push_back(std::move(l));
  }
  producer_lanes(r, t);
  (longest ? longest_ : typical_) = std::move(t);
}

// One lane per device stream and kind; device work on no known stream in
// one lane per kind.
void RankEngine::device_lanes(const StepInputs& in, const StepResult& r, Timeline& t) const {
  static constexpr const char* kDevKind[4] = {"compute", "comm", "h2d", "other"};
  static constexpr const char* kDevWords[4] = {"kernels", "collectives", "H2D copies", "other copies"};
  const int64_t s0 = r.start_ns, s1 = r.end_ns;
  const auto rel = [&](int64_t a, int64_t b) { return std::pair<int64_t, int64_t>{a - s0, b - s0}; };
  const Ivs* merged_dev[4] = {&in.compute, &in.comm, &in.h2d, &in.other};
  TimelineLanes dev;
  for (size_t k = 0; k < 4; ++k) {
    bool any = false;
    streams_[k].for_each(s0, s1, [&](uint32_t track, int64_t a, int64_t b) {
      const auto name = [&] { return track_label(track) + ": " + kDevWords[k]; };
      dev.at(track, k, name, kDevKind[k]).spans.push_back(rel(a, b));
      any = true;
    });
    if (!any && !merged_dev[k]->empty()) {  // device work on no known stream
      Lane& l = dev.at(~0u, k, [&] { return std::string("device: ") + kDevWords[k]; }, kDevKind[k]);
      for (const Iv& v : *merged_dev[k]) l.spans.push_back(rel(v.a, v.b));
    }
  }
  finish_lanes(dev, "other streams", t);
}

// One lane per producer thread (or worker process) and kind: reads, preprocessing.
void RankEngine::producer_lanes(const StepResult& r, Timeline& t) const {
  const int64_t s0 = r.start_ns, s1 = r.end_ns;
  TimelineLanes prod;
  const auto producer = [&](uint32_t track, bool read, int64_t a, int64_t b) {
    const auto name = [&] { return track_label(track) + (read ? ": reads" : ": preprocess"); };
    prod.at(track, read ? 0 : 1, name, read ? "reads" : "preprocess")
        .spans.push_back(std::pair<int64_t, int64_t>{a - s0, b - s0});
  };
  reads_.for_each(s0, s1, [&](uint32_t track, int64_t a, int64_t b) { producer(track, true, a, b); });
  pre_.for_each(s0, s1, [&](uint32_t track, int64_t a, int64_t b) { producer(track, false, a, b); });
  lineage_.collect_busy_tracks(s0, s1, producer);
  loaders_.for_each_fetch(s0, s1, [&](uint32_t track, int64_t a, int64_t b) { producer(track, false, a, b); });
  finish_lanes(prod, "other producers", t);
}

std::string RankEngine::track_label(uint32_t track) const {
  char b[96];
  if (track >= trace_.tracks.size()) {
    std::snprintf(b, sizeof b, "track %u", track);
    return b;
  }
  const TrackDesc& td = trace_.tracks[track];
  const uint32_t pid = td.proc < trace_.procs.size() ? trace_.procs[td.proc].pid : 0;
  switch (td.type) {
    case TrackType::kGpuStream: std::snprintf(b, sizeof b, "GPU %u stream %u", td.device, td.tid); return b;
    case TrackType::kEmulated: return "emulated device";
    case TrackType::kProcess: std::snprintf(b, sizeof b, "process %u", pid); return b;
    default: break;
  }
  if (finder_.decided() && track == finder_.trainer_track()) return "trainer";
  // The thread's name first; the pid only where the trace holds more than
  // one process (DataLoader workers), and only the pid for a main thread.
  if (trace_.procs.size() <= 1)
    std::snprintf(b, sizeof b, "tid %u", td.tid);
  else if (td.tid == pid)
    std::snprintf(b, sizeof b, "pid %u", pid);
  else
    std::snprintf(b, sizeof b, "pid %u tid %u", pid, td.tid);
  return td.name.empty() ? std::string(b) : td.name + " " + b;
}

DataSplit RankEngine::split_stall(const Ivs& stall, int64_t s, int64_t e) {
  stats_.stall_idle_integral += stats_.idle.integrate(stall);
  stats_.stall_idle_covered += stats_.idle.covered(stall);
  DataSplit total;
  Ivs &rest = split_.rest, &piece = split_.piece, &tmp = split_.tmp, &wait = split_.wait;
  rest.assign(stall.begin(), stall.end());
  if (TrainerChans* tc = trainer_chans()) {
    auto it = tc->recs.begin();
    if (tc->recs_by_end)
      it = std::partition_point(it, tc->recs.end(), [s](const WaitRec& w) { return w.b <= s; });
    for (; it != tc->recs.end(); ++it) {
      const WaitRec& w = *it;
      // In end order, no later wait starts before e once b - max_wait >= e.
      if (tc->recs_by_end && (rest.empty() || w.b - tc->max_wait >= e)) break;
      if (w.b <= s || w.a >= e || rest.empty()) continue;
      wait.assign(1, {w.a, w.b});
      intersect(rest, wait, piece);
      if (piece.empty()) continue;
      LoaderCut cut;
      if (loaders_.active() && loaders_.split(piece, finder_.trainer_track(), w.a, w.b, w.batch, cut)) {
        // The hooks recorded this batch: the split is measured. Collate
        // and the worker's earlier batches are preprocessing's part (the
        // chain walk's convention); once the batch was put, the hand-off
        // between processes and the batches taken ahead of it (head of
        // line, each its own hand-off) are the hand-off's.
        total.storage += cut.storage;
        total.handoff += cut.handoff + cut.head_of_line;
        total.preprocess += cut.total() - cut.storage - cut.handoff - cut.head_of_line;
        total.bits |= kSplitExact;
        subtract(rest, piece, tmp);
        rest.swap(tmp);
        continue;
      }
      bool ok = false;
      const DataSplit d = split_by_lineage(piece, w, &ok);
      if (!ok) continue;
      total.storage += d.storage;
      total.preprocess += d.preprocess;
      total.unknown += d.unknown;
      total.bits |= kSplitLineage;
      subtract(rest, piece, tmp);
      rest.swap(tmp);
    }
  }
  if (!rest.empty()) {
    const DataSplit d = split_inferred(rest);
    total.storage += d.storage;
    total.preprocess += d.preprocess;
    total.unknown += d.unknown;
    total.bits |= d.bits;
  }
  return total;
}

DataSplit RankEngine::split_by_lineage(const Ivs& piece, const WaitRec& w, bool* ok) {
  const Batch* b = lineage_.batch_for(w.batch, w.a, w.b);
  if (b == nullptr) return {};
  auto& chain = split_.chain;
  lineage_.walk(*b, w.a, chain);
  if (chain.empty()) return {};
  *ok = true;
  Ivs &storage = split_.storage, &pre = split_.pre, &pre_only = split_.pre_only, &x = split_.x;
  storage.clear();
  pre.clear();
  for (const ChainSeg& seg : chain) (seg.storage ? storage : pre).push_back({seg.a, seg.b});
  pre.push_back({b->ready, INT64_MAX});  // after the batch was ready: hand-over
  normalize(storage);
  normalize(pre);
  subtract(pre, storage, pre_only);
  DataSplit d;
  intersect(piece, storage, x);
  d.storage = length(x);
  intersect(piece, pre_only, x);
  d.preprocess = length(x);
  // Not on the chain (it broke off): the first item was still waiting.
  d.preprocess += length(piece) - d.storage - d.preprocess;
  return d;
}

void RankEngine::take_producers(int64_t a, int64_t b) {
  prod_reads_.clear();
  prod_pre_.clear();
  reads_.collect(a, b, prod_reads_);
  pre_.collect(a, b, prod_pre_);
  lineage_.collect_busy(a, b, prod_reads_, prod_pre_);
  for (Ivs* v : {&prod_reads_, &prod_pre_}) {
    sort_by_start_runs(v->data(), v->size(), prod_scratch_, prod_cuts_);
    normalize(*v);
  }
}

// Without lineage: what the producers were doing while the trainer waited.
DataSplit RankEngine::split_inferred(const Ivs& piece) {
  // Only the producers' work within the stall matters (a fraction of the step).
  take_producers(piece.front().a, piece.back().b);
  DataSplit d;
  // (`piece` may be split_.rest: these are the inferred split's own.)
  Ivs &x = split_.inf_x, &rest = split_.inf_rest, &rest2 = split_.inf_rest2;
  intersect(piece, prod_reads_, x);
  d.storage = length(x);
  subtract(piece, prod_reads_, rest);
  intersect(rest, prod_pre_, x);
  d.preprocess = length(x);
  subtract(rest, prod_pre_, rest2);
  const int64_t len2 = length(rest2);
  const int64_t cpu = std::clamp<int64_t>(std::llround(producer_cpu(rest2)), 0, len2);
  d.preprocess += cpu;
  d.unknown = len2 - cpu;
  const bool any = d.storage + d.preprocess > 0 || !thread_cpu_.empty() || !child_cpu_.empty();
  d.bits = any ? kSplitInferred : kSplitNone;
  return d;
}

}  // namespace stallscope::analyzer
