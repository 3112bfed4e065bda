#include "host_gaps.hpp"

#include <algorithm>
#include <cctype>

namespace stallscope::analyzer {

namespace {

bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The function a Python frame names ("train.py(42): log_metrics" ->
// "log_metrics"), or the last dotted part of a call ("wandb.log" -> "log").
std::string_view function_part(std::string_view n) {
  if (size_t c = n.rfind("): "); c != std::string_view::npos) n = n.substr(c + 3);
  if (size_t d = n.rfind('.'); d != std::string_view::npos) n = n.substr(d + 1);
  return n;
}

bool logging_name(std::string_view l) {
  for (std::string_view k : {"logging/", "logging.", "wandb", "tensorboard", "summarywriter",
                             "add_scalar", "mlflow", "function print>", "builtins.print", "logger"})
    if (has(l, k)) return true;
  const std::string_view f = function_part(l);
  return f == "print" || f == "log" || (f == "info" && has(l, "log")) ||
         f.starts_with("log_metric") || f == "log_dict" || f.starts_with("log_scalar");
}

}  // namespace

uint8_t name_bits(std::string_view name) {
  uint8_t bits = 0;
  const std::string l = lower(name);
  const bool op = l.starts_with("aten::") || l.starts_with("torch::") || l.starts_with("c10d::");
  if (!op) {
    for (std::string_view k : {"dataloader", "data_loader", "data loading", "load_batch", "get_batch",
                               "next_batch", "fetch_batch", "collate", "__getitem__",
                               "torch/utils/data/", "load_data"})
      if (has(l, k)) bits |= kNameData;
    if (logging_name(l)) bits |= kNameLogging;
  }
  if (l.starts_with("optimizer.step#") || has(l, "torch/optim/")) bits |= kNameOptimizer;
  if (has(name, "Launch") || has(l, "launch") || has(name, "Memcpy") || has(name, "Memset"))
    if (!has(name, "Synchronize")) bits |= kNameLaunch;
  return bits;
}

uint8_t NameFlags::decide(uint32_t id) {
  if (id >= names_.size()) return 0;
  if (id >= bits_.size()) bits_.resize(names_.size(), 0);
  uint8_t& b = bits_[id];
  if ((b & kNameDecided) == 0) {
    const std::string& n = names_[id];
    b = static_cast<uint8_t>(name_bits(n) | kNameDecided);
    if (!n.empty() && std::regex_search(n, step_)) b |= kNameStep;
  }
  return b;
}

void GapTotals::push_longest(const GapEntry& g) {
  auto shorter = [](const GapEntry& a, const GapEntry& b) { return a.len > b.len; };
  longest.push_back(g);
  std::push_heap(longest.begin(), longest.end(), shorter);
  if (longest.size() > kLongest) {
    std::pop_heap(longest.begin(), longest.end(), shorter);
    longest.pop_back();
  }
}

void GapTotals::merge(const GapTotals& o) {
  for (const auto& [k, v] : o.activity) activity[k] += v;
  for (const auto& [k, v] : o.sync_calls) sync_calls[k] += v;
  for (const auto& [k, v] : o.optimizer) optimizer[k] += v;
  for (const auto& [k, v] : o.logging) logging[k] += v;
  optimizer_ns += o.optimizer_ns;
  logging_ns += o.logging_ns;
  launches += o.launches;
  steps += o.steps;
  wall_ns += o.wall_ns;
  host_ns += o.host_ns;
  for (size_t c = 0; c < kGapClassCount; ++c) class_ns[c] += o.class_ns[c];
  for (size_t c = 0; c < kGapClassCount; ++c) gaps[c] += o.gaps[c];
  for (size_t c = 0; c < kGapClassCount; ++c) launch_ns[c] += o.launch_ns[c];
  for (const GapEntry& g : o.longest) add_longest(g);
}

// Each instant of a gap goes to the innermost activity covering it: the
// one that started last (activities of a thread nest). Credits come out in
// gap order.
void GapClassifier::sweep(const Ivs& gaps, const std::vector<HostActivity>& acts) {
  credits_.clear();
  stack_.clear();
  size_t gi = 0;
  int64_t cursor = gaps.front().a;
  auto credit = [&](int64_t x, int64_t y, uint32_t act) {
    while (gi < gaps.size() && gaps[gi].b <= x) ++gi;
    for (size_t k = gi; k < gaps.size() && gaps[k].a < y; ++k) {
      const int64_t ov = std::min(y, gaps[k].b) - std::max(x, gaps[k].a);
      if (ov > 0) credits_.push_back({static_cast<uint32_t>(k), act, ov});
    }
  };
  auto advance = [&](int64_t to) {
    while (cursor < to) {
      while (!stack_.empty() && acts[stack_.back()].b <= cursor) stack_.pop_back();
      if (stack_.empty()) {
        cursor = to;
        break;
      }
      const int64_t y = std::min(to, acts[stack_.back()].b);
      credit(cursor, y, stack_.back());
      cursor = y;
    }
  };
  for (uint32_t i = 0; i < acts.size(); ++i) {
    if (acts[i].a > cursor) advance(acts[i].a);
    stack_.push_back(i);
  }
  advance(gaps.back().b);
}

// ns of each gap inside activities whose name has `bit` (`present`: the
// bits of all the step's activities).
void GapClassifier::coverage(const Ivs& gaps, const std::vector<HostActivity>& acts, uint8_t bit,
                             uint8_t present, int64_t PerGap::*field) {
  if ((present & bit) == 0) return;
  cover_.clear();
  for (const HostActivity& x : acts)
    if (flags_.of(x.name) & bit) cover_.push_back({x.a, x.b});
  if (cover_.empty()) return;
  normalize(cover_);
  intersect(gaps, cover_, tmp_);
  size_t g = 0;
  for (const Iv& x : tmp_) {
    while (gaps[g].b <= x.a) ++g;
    per_gap_[g].*field += x.len();
  }
}

// Per gap: the longest launch call overlapping it, how many, and their time
// inside it (a thread's API calls do not nest, so the overlaps add up).
void GapClassifier::launches(const Ivs& gaps, const std::vector<HostActivity>& acts) {
  auto first = gaps.begin();  // the first gap ending after x.a: acts ascend by start
  for (const HostActivity& x : acts) {
    if (x.kind != ActivityKind::kApiCall) continue;
    if (x.name != 0 && (flags_.of(x.name) & kNameLaunch) == 0) continue;
    while (first != gaps.end() && first->b <= x.a) ++first;
    for (auto it = first; it != gaps.end() && it->a < x.b; ++it) {
      const auto g = static_cast<size_t>(it - gaps.begin());
      PerGap& p = per_gap_[g];
      p.launch_dur = std::max(p.launch_dur, x.b - x.a);
      p.launch_in += std::min(x.b, it->b) - std::max(x.a, it->a);
      ++p.launch_n;
    }
  }
}

// Priority: drained after a sync, data loading, launch-bound (the device
// work that ends the gap is no longer than a launch call in it: the host
// launches slower than the device runs), a traced CPU activity, untraced.
// `next_busy`: the first device-busy interval starting at or after the
// gap's end, or null.
inline GapClass GapClassifier::decide(size_t g, const Ivs& gaps, const Iv* next_busy, int64_t traced) const {
  const int64_t len = gaps[g].len();
  const PerGap& p = per_gap_[g];
  if (2 * p.after >= len && p.after > 0) return GapClass::kSync;
  if (2 * p.data >= len && p.data > 0) return GapClass::kData;
  if (p.launch_dur > 0 && next_busy != nullptr && next_busy->a == gaps[g].b &&
      next_busy->len() <= p.launch_dur)
    return GapClass::kLaunch;
  if (2 * traced >= len && traced > 0) return GapClass::kCpuOp;
  return GapClass::kUntraced;
}

// The call whose return began the gap's drain (the sync or API call ending
// nearest the first after-sync window in it) and what made it: the
// outermost operator and the innermost Python frame around the call.
void GapClassifier::sync_call(const Iv& gap, const Ivs& after, const std::vector<HostActivity>& acts,
                              GapEntry& e, GapTotals& out) {
  auto w = std::partition_point(after.begin(), after.end(), [&](const Iv& v) { return v.b <= gap.a; });
  const int64_t r = w != after.end() ? std::max(w->a, gap.a) : gap.a;
  const int64_t tol = gap.len() / 2 + 10'000;
  const HostActivity* call = nullptr;
  int64_t best = INT64_MAX;
  for (const HostActivity& x : acts) {
    if (x.a > r) break;
    if (x.kind != ActivityKind::kSync && x.kind != ActivityKind::kApiCall) continue;
    const int64_t d = x.b > r ? x.b - r : r - x.b;
    if (d > tol || d > best || (d == best && x.kind != ActivityKind::kSync)) continue;
    best = d;
    call = &x;
  }
  e.top = call != nullptr ? call->name : 0;
  e.top_kind = call != nullptr ? call->kind : ActivityKind::kSync;
  if (call != nullptr) {
    const int64_t mid = call->a + (call->b - call->a) / 2;
    for (const HostActivity& x : acts) {
      if (x.a > mid) break;
      if (x.b <= mid || &x == call || (flags_.of(x.name) & kNameStep)) continue;
      if (x.kind == ActivityKind::kOperator && e.made_op == 0) e.made_op = x.name;
      if (x.kind == ActivityKind::kPython || x.kind == ActivityKind::kStackSample ||
          x.kind == ActivityKind::kAnnotation)
        e.made_frame = x.name;
    }
  }
  out.sync_calls[{e.top, e.made_op, e.made_frame, e.top_kind}] += gap.len();
}

// The step's optimizer: its first Optimizer.step#… range, else the first
// optimizer frame.
uint32_t GapClassifier::optimizer_name(const std::vector<HostActivity>& acts) {
  uint32_t frame = 0;
  for (const HostActivity& x : acts) {
    if ((flags_.of(x.name) & kNameOptimizer) == 0) continue;
    if (x.kind == ActivityKind::kAnnotation) return x.name;
    if (frame == 0) frame = x.name;
  }
  return frame;
}

// A step's gaps mostly credit the same activity as the gap before (one
// launch call after the other): its total is found once, not per gap. The
// map's elements stay where they are when it grows.
int64_t& GapClassifier::activity(GapTotals& out, uint64_t key) {
  if (key != last_key_) {
    last_key_ = key;
    last_ns_ = &out.activity[key];
  }
  return *last_ns_;
}

// The gap's activities (credits [from, to)) by (kind, name) into the run's
// totals, except in a sync gap (its drain is the call's), and its top one
// into `e`. Most gaps lie in one activity (a launch call between kernels).
[[gnu::always_inline]] inline void GapClassifier::credit_activities(size_t from, size_t to, GapClass cls,
                                      const std::vector<HostActivity>& acts, GapTotals& out, GapEntry& e) {
  const auto ci = static_cast<uint64_t>(cls);
  if (to - from == 1) {
    const HostActivity& x = acts[credits_[from].act];
    if (cls != GapClass::kSync) activity(out, ci << 40 | uint64_t(x.kind) << 32 | x.name) += credits_[from].ns;
    e.top = x.name;
    e.top_kind = x.kind;
    return;
  }
  if (to - from < 2) return;
  agg_.clear();
  for (size_t k = from; k < to; ++k) {
    const HostActivity& x = acts[credits_[k].act];
    agg_.push_back({uint64_t(x.kind) << 32 | x.name, credits_[k].ns});
  }
  std::sort(agg_.begin(), agg_.end());
  int64_t top_ns = 0;
  for (size_t k = 0; k < agg_.size();) {
    size_t j = k;
    int64_t sum = 0;
    for (; j < agg_.size() && agg_[j].first == agg_[k].first; ++j) sum += agg_[j].second;
    if (cls != GapClass::kSync) activity(out, ci << 40 | agg_[k].first) += sum;
    if (sum > top_ns) {
      top_ns = sum;
      e.top = static_cast<uint32_t>(agg_[k].first);
      e.top_kind = static_cast<ActivityKind>(agg_[k].first >> 32);
    }
    k = j;
  }
}

// A gap's optimizer ns (`opt`, not in a data gap) and logging ns, each
// to its name: the step's optimizer, the logging call covering the gap
// (else the frame that made its sync).
[[gnu::always_inline]] inline void GapClassifier::side_totals(const Iv& gap, GapClass cls, int64_t opt, int64_t logging,
                                const std::vector<HostActivity>& acts, const GapEntry& e, GapTotals& out) {
  if (cls != GapClass::kData && opt > 0) {
    out.optimizer_ns += opt;
    if (!opt_known_) opt_name_ = optimizer_name(acts);
    opt_known_ = true;
    out.optimizer[opt_name_] += opt;
  }
  if (logging <= 0) return;
  out.logging_ns += logging;
  uint32_t who = 0;
  for (const HostActivity& x : acts) {
    if (x.a >= gap.b) break;
    if ((flags_.of(x.name) & kNameLogging) && x.b > gap.a) who = x.name;
  }
  out.logging[who != 0 ? who : e.made_frame] += logging;
}

GapNs GapClassifier::classify(const HostSets& hs, int64_t step_start, uint64_t step_index,
                              std::vector<HostActivity>& acts, GapTotals& out) {
  GapNs ns{};
  const Ivs& gaps = hs.host;
  if (gaps.empty()) return ns;
  const auto before = [](const HostActivity& x, const HostActivity& y) {
    return x.a != y.a ? x.a < y.a : x.b > y.b;
  };
  // One pass: empty activities and the step's own ranges leave; the name
  // bits present, whether a launch call is there, and whether the rest is
  // in strict order already are noted. Only a strict order is left as it
  // is: where two activities tie, the order std::sort gives them stays theirs.
  uint8_t present = 0;
  bool sorted = true, any_launch = false;
  size_t keep = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    const HostActivity& x = acts[i];  // (a copy goes through the stack: a stalled reload)
    if (x.b <= x.a) continue;
    const uint8_t bits = flags_.of(x.name);
    if (x.kind == ActivityKind::kAnnotation && (bits & kNameStep)) continue;
    present |= bits;
    any_launch = any_launch || (x.kind == ActivityKind::kApiCall && (x.name == 0 || (bits & kNameLaunch)));
    if (keep > 0 && !before(acts[keep - 1], x)) sorted = false;
    if (keep != i) acts[keep] = x;
    ++keep;
  }
  acts.resize(keep);
  if (!sorted) std::sort(acts.begin(), acts.end(), before);
  per_gap_.assign(gaps.size(), PerGap{});
  if (!hs.after.empty()) {
    intersect(gaps, hs.after, tmp_);
    for (size_t g = 0, k = 0; k < tmp_.size(); ++k) {
      while (gaps[g].b <= tmp_[k].a) ++g;
      per_gap_[g].after += tmp_[k].len();
    }
  }
  last_key_ = kNoKey;  // `out` may be another step's totals
  coverage(gaps, acts, kNameData, present, &PerGap::data);
  coverage(gaps, acts, kNameOptimizer, present, &PerGap::opt);
  coverage(gaps, acts, kNameLogging, present, &PerGap::log);
  if (any_launch) launches(gaps, acts);
  sweep(gaps, acts);
  size_t c = 0, busy = 0;
  opt_known_ = false;
  for (size_t g = 0; g < gaps.size(); ++g) {
    const size_t from = c;
    int64_t traced = 0;
    for (; c < credits_.size() && credits_[c].gap == g; ++c) traced += credits_[c].ns;
    while (busy < hs.busy.size() && hs.busy[busy].a < gaps[g].b) ++busy;  // gaps ascend
    const GapClass cls = decide(g, gaps, busy < hs.busy.size() ? &hs.busy[busy] : nullptr, traced);
    const auto ci = static_cast<size_t>(cls);
    ns[ci] += gaps[g].len();
    const PerGap& p = per_gap_[g];
    out.launch_ns[ci] += p.launch_in;
    ++out.gaps[ci];
    GapEntry e{gaps[g].len(), gaps[g].a - step_start, step_index, cls};
    credit_activities(from, c, cls, acts, out, e);
    int64_t logging = p.log;
    if (cls == GapClass::kSync) {
      sync_call(gaps[g], hs.after, acts, e, out);
      activity(out, uint64_t(ci) << 40 | uint64_t(e.top_kind) << 32 | e.top) += gaps[g].len();
      // A sync right before a logging call (loss.item() for a print): the
      // whole drain is the logging's.
      if (logging > 0 || (flags_.of(e.made_frame) & kNameLogging)) logging = gaps[g].len();
    }
    if (cls == GapClass::kLaunch) out.launches += p.launch_n;
    side_totals(gaps[g], cls, p.opt, logging, acts, e, out);
    out.add_longest(e);
  }
  return ns;
}

}  // namespace stallscope::analyzer
