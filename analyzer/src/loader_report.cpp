// The DataLoader blocks: each retired wait counted for its loader (its
// split, its batch, the worker that made it, head-of-line waits, epoch
// start-ups), and the `set …` marks.
#include <algorithm>
#include <cmath>
#include <map>

#include "loader_model.hpp"

namespace stallscope::analyzer {

namespace {
constexpr int64_t kKeepNs = 10'000'000'000;  // records kept behind the retired waits
constexpr size_t kLookAround = 64;           // hand-offs looked at around one wait
// Bounds on what a damaged trace can make the model hold.
constexpr size_t kMaxWorkers = 4096;  // worker processes per loader
double ms(double ns) { return ns / 1e6; }
}  // namespace

void LoaderModel::count_fetch(Acc& a, uint32_t track, const Span& f, uint32_t pid, double wait_ms) {
  if (a.workers.size() >= kMaxWorkers && !a.workers.contains({f.worker, pid})) return;
  WorkerAcc& w = a.workers[{f.worker, pid}];
  w.batches += 1;
  w.fetch_ns += double(f.b - f.a);
  auto it = lanes_.find(track);
  if (it == lanes_.end()) return;
  const auto& v = it->second.spans;
  for (size_t i = it->second.span_from(f.a); i < v.size() && v[i].b <= f.b; ++i) {
    const Span* s = &v[i];
    if (s->a < f.a || s == &f) continue;
    if (is_item(s->part)) {
      w.item_ns += double(s->b - s->a);
      w.samples += std::max<uint32_t>(s->count, 1);
      if (s->part == format::SamplePart::kGetItem && s->count <= 1 && a.items.size() < kMaxItems) {
        uint32_t file = 0;
        reads_in(it->second, s->a, s->b, &file);
        a.items.push_back({float(ms(double(s->b - s->a))), float(wait_ms), file, s->index, s->batch,
                           a.rep.batches});
      }
    } else if (s->part == format::SamplePart::kCollate) {
      w.collate_ns += double(s->b - s->a);
      w.collates += 1;
    }
  }
}

// While the trainer waited for batch h, a later batch of the same iterator
// may already have been put: a head-of-line wait.
void LoaderModel::head_of_line(Acc& a, const Wait& w, const Handoff& h) {
  auto it = handoffs_.find(w.track);
  if (it == handoffs_.end()) return;
  const auto& q = it->second;
  auto s = std::lower_bound(q.begin(), q.end(), w.a,
                            [](const Handoff& x, int64_t t) { return x.received < t; });
  int64_t earliest = w.b;
  for (size_t n = 0; s != q.end() && n < kLookAround; ++s, ++n) {
    if (s->loader != h.loader || s->generation != h.generation || s->batch <= h.batch) continue;
    Fetch f{};
    if (fetch_for(*s, f) && f.span->b < w.b)
      earliest = std::min(earliest, std::max(f.span->b, w.a));
  }
  if (earliest < w.b) {
    ++a.rep.head_of_line_waits;
    a.rep.head_of_line_ready_ms += ms(double(w.b - earliest));
  }
}

void LoaderModel::count_wait(const Wait& w) {
  const Handoff* h = handoff_for(w.track, w.a, w.b, w.batch);
  const Span* tf = h == nullptr ? trainer_fetch(w.track, w.a, w.b) : nullptr;
  uint64_t loader = h != nullptr ? h->loader : tf != nullptr ? tf->loader : 0;
  if (loader == 0) {
    // A wait with no record of its batch: the loader's when only one is known.
    if (configs_.size() != 1 || handoffs_.count(w.track) + lanes_.count(w.track) == 0) return;
    loader = configs_.begin()->first;
  }
  Acc* ap = acc(loader);
  if (ap == nullptr) return;
  Acc& a = *ap;
  DataLoaderReport& r = a.rep;
  const double len = double(w.b - w.a);
  ++r.waits;
  r.wait_ms += ms(len);
  if (w.in_step) {
    ++r.waits_in_steps;
    a.in_step_wait_ns += double(w.in_step_ns);
  }
  LoaderCut cut;
  const bool split_ok =
      (h != nullptr || tf != nullptr) && split(Ivs{{w.a, w.b}}, w.track, w.a, w.b, w.batch, cut);
  if (!split_ok) {
    r.split.unjoined_ms += ms(len);
    if (h != nullptr) ++r.unjoined_batches;
    return;
  }
  r.split.storage_ms += ms(double(cut.storage));
  r.split.preprocess_ms += ms(double(cut.preprocess));
  r.split.collate_ms += ms(double(cut.collate));
  r.split.worker_wait_ms += ms(double(cut.worker_wait));
  r.split.handoff_ms += ms(double(cut.handoff));
  r.split.head_of_line_ms += ms(double(cut.head_of_line));
  ++r.batches;
  int64_t received = w.b;
  uint32_t gen = 0;
  if (h != nullptr) {
    Fetch f{};
    fetch_for(*h, f);
    count_fetch(a, f.track, *f.span, h->pid, ms(double(w.in_step_ns)));
    if (f.span->b > std::max(h->asked, w.a)) {
      // The hand-off itself: not the worker's next fetches it waited behind.
      a.handoff_ns += double(h->received - f.span->b -
                             busy_after(f.track, f.span->b, h->received));
      a.handoff_raw_ns += double(h->received - f.span->b);
      ++a.handoffs_timed;
    }
    if (cut.head_of_line > 0)
      ++r.head_of_line_waits;
    else if (cut.handoff < w.b - w.a)
      head_of_line(a, w, *h);  // a late batch: others ready behind it?
    received = h->received;
    gen = h->generation;
  } else {
    count_fetch(a, w.track, *tf, pid_of(w.track), ms(double(w.in_step_ns)));
    gen = tf->generation;
  }
  auto st = a.gen_start.find(gen);
  auto ep = a.epochs.find(gen);  // (made by its loader_config)
  if (st != a.gen_start.end() && ep != a.epochs.end() && ep->second.startup_ms < 0 &&
      received >= st->second) {
    ep->second.startup_ms = ms(double(received - st->second));
    ep->second.first_wait_ms = ms(double(w.in_step_ns));
  }
}

void LoaderModel::retire(int64_t before) {
  while (!waits_.empty() && waits_.front().b < before) {
    count_wait(waits_.front());
    waits_.pop_front();
  }
  if (before != INT64_MAX) evict(before - kKeepNs);
}

void LoaderModel::evict(int64_t before) {
  for (auto& [track, l] : lanes_) {
    while (!l.spans.empty() && l.spans.front().b < before) l.spans.pop_front();
    while (!l.reads.empty() && l.reads.front().b < before) {
      l.reads.pop_front();
      if (!l.read_files.empty()) l.read_files.pop_front();
    }
  }
  for (auto& [track, q] : handoffs_)
    while (!q.empty() && q.front().received < before) q.pop_front();
  for (auto it = fetches_.begin(); it != fetches_.end();) {
    std::erase_if(it->second, [&](const auto& x) { return x.second < before; });
    it = it->second.empty() ? fetches_.erase(it) : std::next(it);
  }
}

void LoaderModel::fetch_shares(const Acc& a, const CpuOf& cpu_of, DataLoaderReport& r) const {
  double fetch = 0, storage = 0, cpu = 0;
  bool cpu_known = static_cast<bool>(cpu_of);
  // Its fetches: of its id, or of no id (older hooks) from its workers.
  auto mine = [&](const std::pair<uint64_t, uint32_t>& k) {
    if (k.first == r.id) return true;
    if (k.first != 0) return false;
    return std::any_of(a.workers.begin(), a.workers.end(),
                       [&](const auto& w) { return w.first.second == k.second; });
  };
  for (auto it = pid_fetches_.begin(); it != pid_fetches_.end(); ++it) {
    if (!mine(it->first)) continue;
    fetch += it->second.fetch_ns;
    storage += it->second.storage_ns;
    // The trainer's own process (num_workers=0) also trains: its CPU is not the fetches'.
    const double c = cpu_known && !it->second.trainer ? cpu_of(it->first.second) : -1;
    cpu_known = cpu_known && c >= 0;
    cpu += std::max(c, 0.0);
  }
  if (fetch <= 0) return;
  r.fetch_storage_share = std::clamp(storage / fetch, 0.0, 1.0);
  if (cpu_known) r.fetch_cpu_share = std::clamp(cpu / fetch, 0.0, 1.0);
}

void LoaderModel::slow_samples(const Acc& a, DataLoaderReport& r) const {
  constexpr size_t kMinItems = 20, kListed = 8;
  constexpr double kTimes = 5, kOverMs = 1, kFew = 0.05;
  const size_t n = a.items.size();
  r.samples_timed = n;
  if (n < kMinItems) return;
  std::vector<float> v;
  v.reserve(n);
  for (const Item& x : a.items) v.push_back(x.ms);
  std::sort(v.begin(), v.end());
  r.sample_p50_ms = v[n / 2];
  r.sample_p99_ms = v[std::min(n - 1, static_cast<size_t>(std::ceil(0.99 * double(n))) - 1)];
  // A quarter of the slowest too: a busy machine's descheduled samples
  // (a few ms) are not named beside the ones far slower.
  const double cut = std::max({kTimes * r.sample_p50_ms, r.sample_p50_ms + kOverMs, 0.25 * v.back()});
  std::map<uint64_t, LoaderSlowSample> by_index;
  uint64_t slow = 0;
  double excess = 0;
  for (const Item& x : a.items) {
    if (x.ms < cut) continue;
    ++slow;
    excess += x.ms - r.sample_p50_ms;
    if (by_index.size() >= 4096 && !by_index.contains(x.index)) continue;
    LoaderSlowSample& s = by_index[x.index];
    s.index = x.index;
    ++s.times;
    if (x.ms > s.ms) {
      s.ms = x.ms;
      s.file = x.file < trace_.files.size() ? trace_.files[x.file] : "";
    }
  }
  if (slow == 0 || double(slow) > kFew * double(n)) return;  // none, or no tail: all slow
  r.slow_sample_count = slow;
  r.slow_sample_excess_ms = excess;
  // What they cost the trainer: of each wait on a batch holding one, the
  // part beyond the median wait, at most their time beyond the median
  // sample (batches queued ahead absorb the rest).
  std::vector<float> waits;
  std::map<uint64_t, std::pair<double, double>> held;  // wait -> (its length, the slow ones' excess)
  for (const Item& x : a.items) {
    waits.push_back(x.wait_ms);
    if (x.ms < cut) continue;
    auto& h = held[x.wait];
    h.first = x.wait_ms;
    h.second += x.ms - r.sample_p50_ms;
  }
  std::nth_element(waits.begin(), waits.begin() + long(n / 2), waits.end());
  const double typical = waits[n / 2];
  for (const auto& [k, h] : held) r.slow_sample_stall_ms += std::clamp(h.first - typical, 0.0, h.second);
  for (auto& [i, s] : by_index) r.slow_samples.push_back(std::move(s));
  std::sort(r.slow_samples.begin(), r.slow_samples.end(),
            [](const auto& x, const auto& y) { return x.ms != y.ms ? x.ms > y.ms : x.index < y.index; });
  if (r.slow_samples.size() > kListed) r.slow_samples.resize(kListed);
}

std::vector<DataLoaderReport> LoaderModel::finish(const CpuOf& cpu_of) {
  retire(INT64_MAX);
  std::vector<const Acc*> order;
  double in_step_wait = 0;
  for (const auto& [id, a] : acc_) {
    order.push_back(&a);
    in_step_wait += a.in_step_wait_ns;
  }
  std::sort(order.begin(), order.end(),
            [](const Acc* x, const Acc* y) { return x->order < y->order; });
  std::vector<DataLoaderReport> out;
  for (const Acc* a : order) {
    DataLoaderReport r = a->rep;
    r.fed_optimizer = r.waits_in_steps > 0;
    if (r.fed_optimizer)
      r.consume_ms = ms(std::max(0.0, double(steps_ns_) - in_step_wait)) / double(r.waits_in_steps);
    if (a->handoffs_timed > 0) r.handoff_ms = ms(a->handoff_ns / double(a->handoffs_timed));
    WorkerAcc all;
    for (const auto& [key, w] : a->workers) {
      r.workers.push_back({key.first, key.second, static_cast<uint64_t>(w.batches),
                           ms(w.fetch_ns / w.batches),
                           w.samples > 0 ? ms(w.item_ns / w.samples) : -1,
                           w.collates > 0 ? ms(w.collate_ns / w.collates) : -1});
      all.batches += w.batches, all.fetch_ns += w.fetch_ns, all.item_ns += w.item_ns;
      all.samples += w.samples, all.collate_ns += w.collate_ns, all.collates += w.collates;
    }
    if (all.batches > 0) r.fetch_ms = ms(all.fetch_ns / all.batches);
    if (all.samples > 0) r.getitem_ms = ms(all.item_ns / all.samples);
    if (all.collates > 0) r.collate_ms = ms(all.collate_ns / all.collates);
    for (const auto& w : r.workers)
      r.sample_spans_off = r.sample_spans_off || spans_off_.contains(w.pid);
    for (const auto& [gen, ep] : a->epochs) r.epochs.push_back(ep);
    fetch_shares(*a, cpu_of, r);
    slow_samples(*a, r);
    guard_facts(r);
    out.push_back(std::move(r));
  }
  return out;
}

bool parse_setting_mark(const std::string& text, SettingMark& out) {
  if (text.rfind("set ", 0) != 0) return false;
  std::vector<std::string> tok;
  size_t at = 4;
  while (at < text.size() && tok.size() < 4) {
    const size_t sp = text.find(' ', at);
    tok.push_back(text.substr(at, sp == std::string::npos ? std::string::npos : sp - at));
    at = sp == std::string::npos ? text.size() : sp + 1;
  }
  if (tok.size() < 2) return false;
  static const char* const kStatus[] = {"applied", "adjusted", "refused", "unmatched",
                                        "reassigned"};
  if (std::none_of(std::begin(kStatus), std::end(kStatus),
                   [&](const char* k) { return tok[0] == k; }))
    return false;
  out = {};
  out.text = text;
  out.status = tok[0];
  size_t rest = std::min(text.size(), 4 + tok[0].size() + 1);  // past "set STATUS "
  // "set refused at SITE: REASON" names no setting (the hooks could not bind any).
  const bool has_kv = tok[1] != "at";
  bool reason_next = false;
  if (has_kv) {
    std::string kv = tok[1];
    reason_next = !kv.empty() && kv.back() == ':';
    if (reason_next) kv.pop_back();
    const size_t eq = kv.find('=');
    out.key = kv.substr(0, eq);
    out.value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    rest = std::min(text.size(), rest + tok[1].size() + 1);
  }
  const size_t site_at = has_kv ? 2 : 1;  // where "at SITE" would be
  if (!reason_next && tok.size() > site_at + 1 && tok[site_at] == "at") {
    std::string site = tok[site_at + 1];
    if (!site.empty() && site.back() == ':') site.pop_back();
    out.site = site;
    rest = std::min(text.size(), rest + 3 + tok[site_at + 1].size() + 1);
  }
  std::string detail = text.substr(rest);
  if (detail.size() >= 2 && detail.front() == '(' && detail.back() == ')')
    detail = detail.substr(1, detail.size() - 2);
  out.detail = detail;
  return true;
}

}  // namespace stallscope::analyzer
