// Clock alignment across hosts (RELIABILITY.md 7): every rank starts on its
// file's wall clock (CLOCK_REALTIME at the recorder start); then each host
// other than the reference one is corrected by the median difference of
// near-simultaneous instants — collective completions, the same (comm, seq)
// on both hosts — with a drift term on long runs. Ranks of one host share
// one monotonic clock, so one correction serves them all.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "multirank_internal.hpp"

namespace stallscope::analyzer::multirank {

namespace {

struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& k) const noexcept {
    return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ULL ^ k.second);
  }
};
using CompletionMap = std::unordered_map<std::pair<uint64_t, uint64_t>, int64_t, KeyHash>;

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t k = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// Median (t, d) of a slice of points sorted by t.
std::pair<double, double> median_point(const std::vector<std::pair<int64_t, int64_t>>& p, size_t lo,
                                       size_t hi) {
  std::vector<int64_t> ts, ds;
  for (size_t i = lo; i < hi; ++i) {
    ts.push_back(p[i].first);
    ds.push_back(p[i].second);
  }
  return {static_cast<double>(median_of(ts)), static_cast<double>(median_of(ds))};
}

// The representative rank of each host: the first with collectives.
std::map<std::string, size_t> host_representatives(const std::vector<RankReport>& ranks) {
  std::map<std::string, size_t> rep;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (!ranks[i].collectives.empty()) rep.try_emplace(ranks[i].host, i);
  return rep;
}

CompletionMap completions(const RankReport& r, const RankClock& c) {
  CompletionMap m;
  m.reserve(r.collectives.size());
  for (const auto& x : r.collectives) m[{x.comm_id, x.seq}] = c.to_common(x.end_ns);
  return m;
}

}  // namespace

LineFit fit_offset(std::vector<std::pair<int64_t, int64_t>> pts, const CrossRankOptions& opt) {
  LineFit f;
  if (pts.empty()) return f;
  std::sort(pts.begin(), pts.end());
  const int64_t span = pts.back().first - pts.front().first;
  if (span >= opt.drift_min_span_ns && pts.size() >= opt.drift_min_points) {
    const auto [t1, d1] = median_point(pts, 0, pts.size() / 2);
    const auto [t2, d2] = median_point(pts, pts.size() / 2, pts.size());
    f.b = t2 > t1 ? (d2 - d1) / (t2 - t1) : 0;
    f.t0 = static_cast<int64_t>(t1);
    f.a = d1;
  } else {
    std::vector<int64_t> ds;
    for (const auto& p : pts) ds.push_back(p.second);
    f.a = static_cast<double>(median_of(ds));
    f.t0 = pts.front().first;
  }
  std::vector<int64_t> res;
  for (const auto& [t, d] : pts)
    res.push_back(std::llabs(d - std::llround(f.a + f.b * static_cast<double>(t - f.t0))));
  f.residual_ns = static_cast<double>(median_of(res));
  return f;
}

ClockAlignment align_clocks(const std::vector<RankReport>& ranks, const CrossRankOptions& opt,
                            std::vector<RankClock>* clocks) {
  ClockAlignment out;
  clocks->assign(ranks.size(), {});
  std::map<std::string, bool> hosts;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].realtime_known) (*clocks)[i].base = ranks[i].realtime_offset_ns;
    hosts[ranks[i].host] = true;
  }
  out.hosts = hosts.size();
  if (hosts.size() <= 1) {
    out.method = "single_host";
    out.note = "one host: all ranks share one monotonic clock";
    return out;
  }
  const auto reps = host_representatives(ranks);
  const size_t ref = reps.empty() ? 0 : reps.begin()->second;
  const CompletionMap ref_end = completions(ranks[ref], (*clocks)[ref]);
  std::map<std::string, LineFit> fits;
  double worst = 0;
  for (const auto& [host, i] : reps) {
    ClockAlignment::Host h{host, 0, 0, 0, 0};
    if (i != ref) {
      std::vector<std::pair<int64_t, int64_t>> pts;
      for (const auto& x : ranks[i].collectives) {
        const auto it = ref_end.find({x.comm_id, x.seq});
        if (it == ref_end.end()) continue;
        const int64_t t = (*clocks)[i].to_common(x.end_ns);
        pts.emplace_back(t, it->second - t);
      }
      h.matched = pts.size();
      if (!pts.empty()) {
        const LineFit f = fit_offset(std::move(pts), opt);
        fits[host] = f;
        h.offset_ms = (f.a + f.b * 0) / 1e6;
        h.drift_ppm = f.b * 1e6;
        h.residual_us = f.residual_ns / 1e3;
        worst = std::max(worst, h.residual_us);
        out.matched += h.matched;
      }
    }
    out.per_host.push_back(h);
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto it = fits.find(ranks[i].host);
    if (it == fits.end()) continue;
    (*clocks)[i].a = it->second.a;
    (*clocks)[i].b = it->second.b;
    (*clocks)[i].t0 = it->second.t0;
  }
  const size_t unmatched = hosts.size() - 1 - fits.size();
  if (unmatched == 0) {
    out.method = "collectives";
    out.residual_skew_us = worst;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%zu hosts aligned on %zu matched collective completions; residual skew %.0f us",
                  hosts.size(), out.matched, worst);
    out.note = buf;
  } else {
    out.method = "wall_clock_only";
    out.max_error_ms = opt.wall_clock_error_ms;
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "%zu of %zu hosts had no collective matched with the reference host: aligned by "
                  "wall clock only, may be off by ~%.0f ms",
                  unmatched, hosts.size(), opt.wall_clock_error_ms);
    out.note = buf;
  }
  return out;
}

}  // namespace stallscope::analyzer::multirank
