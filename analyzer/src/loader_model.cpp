// Records of the DataLoader hooks and their joins; the exact split of a
// wait on one batch (DESIGN.md "Splitting a data stall", exact where the
// hooks recorded the batch's fetch).
#include "loader_model.hpp"

#include <algorithm>

namespace stallscope::analyzer {

namespace {
constexpr size_t kMaxChain = 64;  // previous fetches walked back on a worker
constexpr size_t kStashed = 64;   // hand-offs looked back at for a batch received early
}  // namespace

uint32_t LoaderModel::pid_of(uint32_t track) const {
  if (track >= trace_.tracks.size()) return 0;
  const uint32_t p = trace_.tracks[track].proc;
  return p < trace_.procs.size() ? trace_.procs[p].pid : 0;
}

LoaderModel::Acc* LoaderModel::acc(uint64_t loader) {
  if (acc_.size() >= kMaxLoaders && !acc_.contains(loader)) return nullptr;
  auto [it, fresh] = acc_.try_emplace(loader);
  if (fresh) {
    it->second.order = next_order_++;
    it->second.rep.id = loader;
  }
  return &it->second;
}

void LoaderModel::on_config(const Ev& e) {
  any_ = true;
  const LoaderConfig& c = e.loader();
  Acc* ap = acc(c.loader);
  if (ap == nullptr) return;
  Acc& a = *ap;
  configs_[c.loader] = c;
  DataLoaderReport& r = a.rep;
  auto name = [&](uint32_t id) { return id < trace_.names.size() ? trace_.names[id] : ""; };
  r.site = name(c.site);
  r.dataset = name(e.name);
  r.sampler = name(c.sampler);
  r.batch_sampler = name(c.batch_sampler);
  r.collate = name(c.collate);
  r.num_workers = c.num_workers;
  r.prefetch_factor = c.prefetch_factor;
  r.batch_size = c.batch_size;
  r.dataset_len = c.dataset_len;
  r.pin_memory = c.pin_memory == format::PinMemory::kOn         ? "on"
                 : c.pin_memory == format::PinMemory::kInactive ? "inactive"
                                                                : "off";
  r.mp_context = c.mp_context == format::MpContext::kFork         ? "fork"
                 : c.mp_context == format::MpContext::kSpawn      ? "spawn"
                 : c.mp_context == format::MpContext::kForkserver ? "forkserver"
                                                                  : "unknown";
  r.dataset_kind = c.dataset_kind == format::DatasetKind::kMapStyle   ? "map"
                   : c.dataset_kind == format::DatasetKind::kIterable ? "iterable"
                                                                      : "unknown";
  r.persistent_workers = c.persistent_workers;
  r.drop_last = c.drop_last;
  r.in_order = c.in_order;
  r.getitems = c.getitems;
  r.overridden = r.overridden || c.overridden;
  ++r.generations;
  if (a.epochs.size() >= kMaxGenerations && !a.epochs.contains(c.generation)) return;
  a.gen_start[c.generation] = e.start;
  LoaderEpoch& ep = a.epochs[c.generation];
  ep.generation = c.generation;
  ep.workers_started = c.num_workers > 0 && (c.generation == 0 || !c.persistent_workers);
}

void LoaderModel::on_sample(const Ev& e) {
  if (e.phase != format::kComplete) return;
  any_ = true;
  const SampleSpan& s = e.sample();
  Lane& l = lanes_[e.track];
  l.spans.push_back(
      {e.start, e.end, s.loader, s.batch, s.index, s.generation, s.count, s.worker, s.part});
  if (s.part != format::SamplePart::kFetch) return;
  l.max_fetch = std::max(l.max_fetch, e.end - e.start);
  const uint32_t pid = pid_of(e.track);
  fetches_[{pid, s.batch}].push_back({e.track, e.end});
  // Every fetch of a worker, waited for or not: how much of its busy time
  // it spends in reads (its reads have all arrived: they end before it).
  if (pid_fetches_.size() >= kMaxLoaders * 64 && !pid_fetches_.contains({s.loader, pid})) return;
  PidFetches& p = pid_fetches_[{s.loader, pid}];
  p.fetches += 1;
  p.trainer = p.trainer || s.worker < 0;
  p.fetch_ns += double(e.end - e.start);
  p.storage_ns += double(reads_in(l, e.start, e.end));
}

int64_t LoaderModel::reads_in(const Lane& l, int64_t a, int64_t b, uint32_t* longest) const {
  // Reads arrive as they end; one thread's reads do not overlap.
  auto r = std::lower_bound(l.reads.begin(), l.reads.end(), a,
                            [](const Iv& v, int64_t t) { return v.b <= t; });
  int64_t sum = 0, best = 0;
  for (; r != l.reads.end() && r->b - l.max_read < b; ++r) {
    const int64_t n = std::min(r->b, b) - std::max(r->a, a);
    if (n <= 0) continue;
    sum += n;
    if (longest != nullptr && n > best) {
      best = n;
      const size_t k = static_cast<size_t>(r - l.reads.begin());
      *longest = k < l.read_files.size() ? l.read_files[k] : 0;
    }
  }
  return sum;
}

void LoaderModel::for_each_fetch(int64_t a, int64_t b,
                                 const std::function<void(uint32_t, int64_t, int64_t)>& fn) const {
  for (const auto& [track, l] : lanes_)
    for (size_t i = l.span_from(a); i < l.spans.size(); ++i)
      if (const Span& s = l.spans[i]; s.a < b && s.b > a) fn(track, std::max(s.a, a), std::min(s.b, b));
}

void LoaderModel::on_read(const Ev& e) {
  if (e.phase != format::kComplete || !any_) return;
  // Only threads that load samples matter; a read arrives before the span
  // holding it, so every thread's reads are kept for a while.
  Lane& l = lanes_[e.track];
  const int64_t a = e.start - static_cast<int64_t>(e.io().queued_ns);
  l.reads.push_back({a, e.end});
  l.read_files.push_back(e.io().file);
  l.max_read = std::max(l.max_read, e.end - a);
}

void LoaderModel::on_handoff(const Ev& e) {
  any_ = true;
  const BatchHandoff& h = e.handoff();
  auto& q = handoffs_[e.track];
  Handoff x{h.asked_ns, e.end, h.loader, h.batch, h.generation, h.worker_pid, h.worker};
  auto pos = q.end();
  while (pos != q.begin() && (pos - 1)->received > x.received) --pos;
  q.insert(pos, x);
}

// Kept only once a DataLoader record was seen (its loader_config precedes
// its waits on the trainer thread): other runs pay nothing here.
void LoaderModel::on_wait(const Ev& e) {
  if (e.phase != format::kComplete || !any_) return;
  // The shim's reading of the same wait off the queue's pipe: the hook's
  // own wait around __next__ stands for it.
  const auto how = static_cast<format::WaitSource>(e.work().worker);
  if (how == format::WaitSource::kPipe || how == format::WaitSource::kRelay) return;
  const uint64_t batch = e.work().batch != 0 ? e.work().batch : e.corr;
  Wait w{e.start, e.end, batch, e.track, false, 0};
  auto pos = waits_.end();
  while (pos != waits_.begin() && (pos - 1)->b > w.b) --pos;
  waits_.insert(pos, w);
}

// The batch that ended the wait: received within it, the wait's own batch
// index first, else the last received.
const LoaderModel::Handoff* LoaderModel::handoff_for(uint32_t track, int64_t a, int64_t b,
                                                     uint64_t batch) const {
  auto it = handoffs_.find(track);
  if (it == handoffs_.end()) return nullptr;
  const auto& q = it->second;
  auto lo = std::lower_bound(q.begin(), q.end(), a,
                             [](const Handoff& h, int64_t t) { return h.received < t; });
  const Handoff* last = nullptr;
  for (auto it2 = lo; it2 != q.end() && it2->received <= b; ++it2) {
    if (it2->batch == batch) return &*it2;
    last = &*it2;
  }
  if (last != nullptr) return last;
  // Received before its turn (kept by the iterator until asked for): asked within the wait.
  for (size_t n = 0; lo != q.begin() && n < kStashed; ++n) {
    --lo;
    if (lo->batch == batch && lo->asked >= a && lo->asked <= b) return &*lo;
  }
  return nullptr;
}

bool LoaderModel::fetch_for(const Handoff& h, Fetch& out) const {
  auto it = fetches_.find({h.pid, h.batch});
  if (it == fetches_.end()) return false;
  const Span* best = nullptr;
  uint32_t best_track = 0;
  for (const auto& [track, end] : it->second) {
    if (end > h.received || (best != nullptr && end <= best->b)) continue;
    auto lit = lanes_.find(track);
    if (lit == lanes_.end()) continue;
    const auto& v = lit->second.spans;
    for (size_t i = lit->second.span_from(end); i < v.size() && v[i].b == end; ++i) {
      if (v[i].part == format::SamplePart::kFetch && v[i].batch == h.batch) {
        best = &v[i];
        best_track = track;
        break;
      }
    }
  }
  if (best == nullptr) return false;
  out = {best_track, best};
  return true;
}

// num_workers=0: a fetch of a known loader on the trainer thread inside the wait.
const LoaderModel::Span* LoaderModel::trainer_fetch(uint32_t track, int64_t a, int64_t b) const {
  auto it = lanes_.find(track);
  if (it == lanes_.end()) return nullptr;
  const auto& v = it->second.spans;
  auto s =
      std::lower_bound(v.begin(), v.end(), a, [](const Span& x, int64_t t) { return x.b <= t; });
  for (; s != v.end() && s->a < b; ++s)
    if (s->part == format::SamplePart::kFetch && s->loader != 0) return &*s;
  return nullptr;
}

// Inside a fetch: reads (not in a collate) are storage, collate spans
// collate, the rest preprocessing.
void LoaderModel::cut_fetch(const Ivs& q, uint32_t track, const Span& f, LoaderCut& out) const {
  Ivs reads, coll, x, y;
  if (auto it = lanes_.find(track); it != lanes_.end()) {
    const Lane& l = it->second;
    // Reads arrive as they end: from the first ending after f.a until none
    // can begin before f.b.
    auto r = std::lower_bound(l.reads.begin(), l.reads.end(), f.a,
                              [](const Iv& v, int64_t t) { return v.b <= t; });
    for (; r != l.reads.end() && r->b - l.max_read < f.b; ++r)
      if (r->b > f.a && r->a < f.b) reads.push_back({std::max(r->a, f.a), std::min(r->b, f.b)});
    // A collate ends inside its fetch.
    for (size_t i = l.span_from(f.a); i < l.spans.size() && l.spans[i].b <= f.b; ++i) {
      const Span& s = l.spans[i];
      if (s.part == format::SamplePart::kCollate && s.a < f.b)
        coll.push_back({std::max(s.a, f.a), std::min(s.b, f.b)});
    }
  }
  normalize(reads);
  normalize(coll);
  intersect(q, coll, x);
  const int64_t c = length(x);
  subtract(reads, coll, y);
  intersect(q, y, x);
  const int64_t st = length(x);
  out.collate += c;
  out.storage += st;
  out.preprocess += length(q) - c - st;
}

// Before the batch's fetch began, its worker was busy with its previous
// fetches (split like them: the chain walk along the same worker) or not
// yet running (start-up, waiting for its index).
void LoaderModel::cut_before(const Ivs& q, uint32_t track, const Span& f, LoaderCut& out) const {
  Ivs rest = q, part, tmp;
  auto it = lanes_.find(track);
  if (it != lanes_.end()) {
    const auto& v = it->second.spans;
    int64_t t = f.a;
    size_t walked = 0;
    // Back from the spans ending at f's start (a previous fetch ends before it).
    size_t i = it->second.span_from(f.a);
    while (i < v.size() && v[i].b <= f.a) ++i;
    for (auto s = v.rbegin() + static_cast<long>(v.size() - i);
         s != v.rend() && walked < kMaxChain && !rest.empty(); ++s) {
      if (s->part != format::SamplePart::kFetch || s->b > t || &*s == &f) continue;
      if (s->b <= rest.front().a) break;
      intersect(rest, Ivs{{s->a, s->b}}, part);
      cut_fetch(part, track, *s, out);
      subtract(rest, part, tmp);
      rest.swap(tmp);
      t = s->a;
      ++walked;
    }
  }
  out.worker_wait += length(rest);
}

void LoaderModel::cut_after(Ivs& q, uint32_t track, int64_t put, LoaderCut& out) const {
  auto it = lanes_.find(track);
  if (it == lanes_.end() || q.empty()) return;
  const auto& v = it->second.spans;
  Ivs part, tmp;
  size_t walked = 0;
  for (size_t i = it->second.span_from(put); i < v.size() && walked < kMaxChain && !q.empty();
       ++i) {
    const Span& s = v[i];
    // Spans arrive by end: a fetch running at the receive ends within the
    // longest fetch after it.
    if (s.b - it->second.max_fetch > q.back().b) break;
    if (s.part != format::SamplePart::kFetch || s.a < put) continue;
    // A worker runs one fetch at a time, so the first fetch ending after
    // the receive is the one still running at it (the feeder waited behind
    // it); every later one began after the receive.
    const bool last = s.b > q.back().b;
    if (last && s.a >= q.back().b) break;
    intersect(q, Ivs{{s.a, s.b}}, part);
    if (!part.empty()) {
      cut_fetch(part, track, s, out);
      subtract(q, part, tmp);
      q.swap(tmp);
      ++walked;
    }
    if (last) break;
  }
}

int64_t LoaderModel::busy_after(uint32_t track, int64_t put, int64_t received) const {
  Ivs q{{put, received}};
  LoaderCut cut;
  cut_after(q, track, put, cut);
  return received - put - length(q);
}

bool LoaderModel::split(const Ivs& piece, uint32_t track, int64_t a, int64_t b, uint64_t batch,
                        LoaderCut& out) {
  if (!any_ || piece.empty()) return false;
  if (const Handoff* h = handoff_for(track, a, b, batch)) {
    Fetch f{};
    if (!fetch_for(*h, f)) return false;
    const int64_t put = f.span->b;
    if (put <= std::max(h->asked, a)) {
      // Ready before it was asked for (asked 0: unknown): one batch's
      // hand-off at the end of the wait (its mean put to receive so far), and
      // before it the trainer taking the batches queued ahead of this one
      // — head-of-line. With no mean yet, all of it is the hand-off.
      // Before either, the worker may have held the batch back while it ran
      // its next fetches (its queue's feeder needs the worker's GIL).
      Ivs rest = piece;
      cut_after(rest, f.track, put, out);
      const int64_t typ = typical_handoff(h->loader);
      const int64_t cut_at = typ < 0 || b - a <= typ ? a : b - typ;
      intersect(rest, Ivs{{cut_at, INT64_MAX}}, x_);
      out.handoff += length(x_);
      out.head_of_line += length(rest) - length(x_);
      return true;
    }
    intersect(piece, Ivs{{put, INT64_MAX}}, x_);
    cut_after(x_, f.track, put, out);
    out.handoff += length(x_);
    intersect(piece, Ivs{{f.span->a, put}}, x_);
    cut_fetch(x_, f.track, *f.span, out);
    intersect(piece, Ivs{{INT64_MIN, f.span->a}}, y_);
    cut_before(y_, f.track, *f.span, out);
    return true;
  }
  const Span* f = trainer_fetch(track, a, b);
  if (f == nullptr) return false;
  intersect(piece, Ivs{{f->a, f->b}}, x_);
  cut_fetch(x_, track, *f, out);
  out.preprocess += length(piece) - length(x_);  // the sampler, the iterator's own work
  return true;
}

int64_t LoaderModel::typical_handoff(uint64_t loader) const {
  auto it = acc_.find(loader);
  if (it == acc_.end() || it->second.handoffs_timed == 0) return -1;
  return static_cast<int64_t>(it->second.handoff_raw_ns / double(it->second.handoffs_timed));
}

// The waits inside a step fed the optimizer; so did, for a step holding
// none, the one that ended just before it (hooks that could not date a
// step's begin back to its __next__ call begin it when __next__ returned).
void LoaderModel::on_step(int64_t start, int64_t end) {
  constexpr int64_t kJustBefore = 1'000'000;  // 1 ms
  steps_ns_ += end - start;
  auto it = std::lower_bound(waits_.begin(), waits_.end(), start - kJustBefore,
                             [](const Wait& w, int64_t t) { return w.b < t; });
  Wait* before = nullptr;
  bool inside = false;
  for (; it != waits_.end() && it->a < end; ++it) {
    if (it->b <= start) {
      before = &*it;  // the latest ending at or before the start
      continue;
    }
    inside = true;
    it->in_step = true;
    it->in_step_ns += std::min(it->b, end) - std::max(it->a, start);
  }
  if (!inside && before != nullptr) before->in_step = true;
}

}  // namespace stallscope::analyzer
