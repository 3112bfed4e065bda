// Steps of a profiler trace that marks none (no ProfilerStep#N: benchmarks,
// inference runs, traces cut by hand). Most certain first:
//   1. the trainer thread's optimizer steps (Optimizer.step#…): one per step;
//   2. the trainer thread's shallowest family of user annotations or Python
//      frames that repeats regularly (the fewest repeats: the outermost loop);
//   3. the period of the kernel-name sequence on the main compute stream
//      (NCCL kernels and their streams left out), walked with re-anchoring so
//      that an evaluation interlude or a variant kernel does not shift it;
//   4. one window over the whole trace.
#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "kineto/kineto_internal.hpp"

namespace stallscope::analyzer::kineto {

namespace {

using Steps = std::vector<std::pair<int64_t, int64_t>>;

constexpr size_t kMinRepeats = 3;
constexpr int kMaxDepth = 8;
constexpr size_t kMaxKernels = 200'000;  // of the main stream, for the period
constexpr size_t kMaxPeriod = 20'000;    // kernels per step
constexpr size_t kScoreSamples = 4096;

std::string_view name_class(std::string_view n) {
  size_t i = n.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(n[i - 1]))) --i;
  return n.substr(0, i);
}

uint32_t busiest_track(const std::vector<HostRec>& host) {
  std::unordered_map<uint32_t, size_t> n;
  for (const HostRec& h : host) ++n[h.track];
  uint32_t best = 0;
  size_t most = 0;
  for (const auto& [t, c] : n)
    if (c > most || (c == most && t < best)) {
      most = c;
      best = t;
    }
  return best;
}

// Steps end where each optimizer step ends (the first one's start is unknown).
bool from_optimizer(const std::vector<const HostRec*>& recs, InferredSteps& out) {
  std::vector<const HostRec*> opt;
  for (const HostRec* h : recs) {
    if (!h->name.starts_with("Optimizer.step#")) continue;
    if (!opt.empty() && h->a < opt.back()->b) continue;  // nested in the previous one
    opt.push_back(h);
  }
  if (opt.size() < kMinRepeats) return false;
  for (size_t i = 1; i < opt.size(); ++i) out.steps.push_back({opt[i - 1]->b, opt[i]->b});
  out.detail = "ends of " + std::string(opt[0]->name) + " on the trainer thread: " +
               std::to_string(opt.size()) + " optimizer steps";
  return true;
}

// Nesting depth of each annotation / Python frame among themselves.
std::vector<int> depths(const std::vector<const HostRec*>& recs) {
  std::vector<int> depth(recs.size(), -1);
  std::vector<int64_t> open;  // ends of the enclosing ranges
  for (size_t i = 0; i < recs.size(); ++i) {
    const HostRec& h = *recs[i];
    if (h.cat != Cat::kAnnotation && h.cat != Cat::kPython && h.cat != Cat::kNone) continue;
    while (!open.empty() && open.back() <= h.a) open.pop_back();
    depth[i] = static_cast<int>(open.size());
    open.push_back(h.b);
  }
  return depth;
}

// The family of ranges that repeats once per step, at the shallowest depth
// where any family repeats: the repeat count most families share (a step's
// data wait, forward, loss, optimizer all repeat as often; an evaluation or
// a checkpoint stands alone), within one for a cut first or last step.
const std::vector<int64_t>* pick_family(
    const std::map<std::string_view, std::vector<int64_t>>& fam, std::string_view* name) {
  auto close = [](size_t x, size_t y) { return x + 1 >= y && y + 1 >= x; };
  size_t best_count = 0, best_support = 0;
  for (const auto& [n, starts] : fam) {
    if (starts.size() < kMinRepeats) continue;
    size_t support = 0;
    for (const auto& [m, other] : fam) support += close(other.size(), starts.size()) ? 1 : 0;
    if (support > best_support || (support == best_support && starts.size() < best_count)) {
      best_support = support;
      best_count = starts.size();
    }
  }
  const std::vector<int64_t>* best = nullptr;
  for (const auto& [n, starts] : fam) {
    if (best_count == 0 || !close(starts.size(), best_count)) continue;
    const bool exact = starts.size() == best_count, best_exact = best && best->size() == best_count;
    if (best == nullptr || (exact && !best_exact) ||
        (exact == best_exact && starts[0] < (*best)[0])) {
      best = &starts;
      *name = n;
    }
  }
  return best;
}

bool from_family(const std::vector<const HostRec*>& recs, InferredSteps& out) {
  const std::vector<int> depth = depths(recs);
  int64_t last_end = 0;
  for (const HostRec* h : recs) last_end = std::max(last_end, h->b);
  for (int d = 0; d < kMaxDepth; ++d) {
    std::map<std::string_view, std::vector<int64_t>> fam;  // class -> starts
    for (size_t i = 0; i < recs.size(); ++i)
      if (depth[i] == d) fam[name_class(recs[i]->name)].push_back(recs[i]->a);
    std::string_view name;
    const std::vector<int64_t>* best = pick_family(fam, &name);
    if (best == nullptr) continue;
    const auto& s = *best;
    int64_t longest = 0;
    for (size_t i = 1; i < s.size(); ++i) {
      out.steps.push_back({s[i - 1], s[i]});
      longest = std::max(longest, s[i] - s[i - 1]);
    }
    // The last one ends with the trainer's activity, at most the longest step later.
    out.steps.push_back({s.back(), std::max(s.back() + 1, std::min(s.back() + longest, last_end))});
    out.detail = "repeated range " + std::string(name) + " on the trainer thread: " +
                 std::to_string(s.size()) + " times";
    return true;
  }
  return false;
}

bool from_host(std::vector<HostRec>& host, InferredSteps& out) {
  if (host.empty()) return false;
  out.track = busiest_track(host);
  out.has_track = true;
  std::vector<const HostRec*> recs;
  for (const HostRec& h : host)
    if (h.track == out.track) recs.push_back(&h);
  std::sort(recs.begin(), recs.end(), [](const HostRec* x, const HostRec* y) {
    return x->a != y->a ? x->a < y->a : x->b > y->b;
  });
  return from_optimizer(recs, out) || from_family(recs, out);
}

// ---------------------------------------------------------------- kernels --

struct Seq {
  std::vector<uint32_t> id;  // kernel names as small ids
  std::vector<int64_t> a, b;
  uint32_t track = 0, stream = 0;
};

// The stream with the most compute kernels, NCCL kernels left out.
Seq main_stream(std::vector<KernelRec>& kernels) {
  std::unordered_map<uint32_t, size_t> n;
  for (const KernelRec& k : kernels)
    if (!k.name.starts_with("nccl")) ++n[k.track];
  Seq s;
  size_t most = 0;
  for (const auto& [t, c] : n)
    if (c > most || (c == most && t < s.track)) {
      most = c;
      s.track = t;
    }
  if (most == 0) return s;
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const KernelRec& x, const KernelRec& y) { return x.a < y.a; });
  std::unordered_map<std::string_view, uint32_t> ids;
  for (const KernelRec& k : kernels) {
    if (k.track != s.track || k.name.starts_with("nccl")) continue;
    if (s.id.size() >= kMaxKernels) break;
    s.stream = k.stream;
    s.id.push_back(ids.try_emplace(k.name, static_cast<uint32_t>(ids.size())).first->second);
    s.a.push_back(k.a);
    s.b.push_back(k.b);
  }
  return s;
}

// Share of sampled positions i with id[i] == id[i + p].
double score(const std::vector<uint32_t>& id, size_t p) {
  const size_t span = id.size() - p, n = std::min(span, kScoreSamples);
  size_t same = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = k * span / n;
    same += id[i] == id[i + p] ? 1 : 0;
  }
  return double(same) / double(n);
}

// The smallest period scoring within 3 % of the best (multiples of the
// step's period score as well; a layer's or a micro-step's lower).
size_t period_of(const std::vector<uint32_t>& id) {
  const size_t pmax = std::min(kMaxPeriod, id.size() / kMinRepeats);
  std::vector<double> sc(pmax + 1, 0);
  double best = 0;
  for (size_t p = 1; p <= pmax; ++p) best = std::max(best, sc[p] = score(id, p));
  if (best < 0.5) return 0;
  for (size_t p = 1; p <= pmax; ++p)
    if (sc[p] >= 0.97 * best) return p;
  return 0;
}

// The phase: the position in the period after the longest device-idle gaps.
size_t offset_of(const Seq& s, size_t p) {
  std::vector<int64_t> gap(p, 0);
  for (size_t i = 1; i < s.id.size(); ++i) gap[i % p] += std::max<int64_t>(0, s.a[i] - s.b[i - 1]);
  return static_cast<size_t>(std::max_element(gap.begin(), gap.end()) - gap.begin());
}

struct Walk {
  const Seq& s;
  size_t p, o, w;
  bool prefix(size_t j) const {  // the step's first w kernels, one in four may differ
    size_t same = 0;
    for (size_t t = 0; t < w; ++t) same += s.id[j + t] == s.id[o + t] ? 1 : 0;
    return 4 * same >= 3 * w;
  }
  bool whole(size_t j) const {  // the step's kernels, sampled: 70 % the same
    const size_t n = std::min<size_t>(p, 64);
    size_t same = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t t = k * p / n;
      same += s.id[j + t] == s.id[o + t] ? 1 : 0;
    }
    return 10 * same >= 7 * n;
  }
  bool starts_step(size_t j) const { return j + p <= s.id.size() && prefix(j) && whole(j); }
  // The next step's first kernel after the step at i: near i + p, else past
  // an interlude (evaluation); 0 when none.
  size_t next(size_t i) const {
    const size_t e = i + p, slack = p / 8;
    for (size_t d = 0; d <= slack; ++d) {
      if (starts_step(e + d)) return e + d;
      if (d > 0 && e - d > i && starts_step(e - d)) return e - d;
    }
    for (size_t j = e + slack + 1; j + p <= s.id.size(); ++j)
      if (starts_step(j)) return j;
    return 0;
  }
};

bool from_kernels(std::vector<KernelRec>& kernels, InferredSteps& out) {
  const Seq s = main_stream(kernels);
  if (s.id.size() < 2 * kMinRepeats) return false;
  const size_t p = period_of(s.id);
  if (p == 0) return false;
  const Walk walk{s, p, offset_of(s, p), std::min<size_t>(8, p)};
  for (size_t i = walk.o;;) {
    const size_t j = walk.next(i);
    if (j == i + p) {
      out.steps.push_back({s.a[i], s.a[j]});
    } else {  // the last step, or one followed by an interlude: it ends with its kernels
      out.steps.push_back({s.a[i], s.b[std::min(i + p, s.id.size()) - 1]});
      if (j == 0) break;
    }
    i = j;
  }
  if (out.steps.size() < 2) {
    out.steps.clear();
    return false;
  }
  out.detail = "period of the kernel sequence on stream " + std::to_string(s.stream) + ": " +
               std::to_string(p) + " kernels";
  return true;
}

}  // namespace

InferredSteps infer_steps(std::vector<HostRec>& host, std::vector<KernelRec>& kernels,
                          int64_t first_ns, int64_t last_ns) {
  InferredSteps out;
  out.source = StepSource::kInferred;
  if (from_host(host, out)) return out;
  out.steps.clear();
  if (from_kernels(kernels, out)) return out;
  out.steps.clear();
  if (first_ns >= last_ns) {
    out.source = StepSource::kNone;
    return out;
  }
  out.source = StepSource::kWholeTrace;
  out.steps.push_back({first_ns, last_ns});
  out.detail = "the whole trace as one window: nothing repeats that delimits steps";
  return out;
}

}  // namespace stallscope::analyzer::kineto
