// Clock alignment across hosts (RELIABILITY.md 7): every rank starts on its
// file's wall clock (CLOCK_REALTIME at the recorder start); then each host
// other than the reference one is corrected by the median difference of
// near-simultaneous instants — collective completions, the same (comm, seq)
// on both hosts — with a drift term on long runs. Ranks of one host share
// one monotonic clock, so one correction serves them all.
#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_map>

#include "multirank_internal.hpp"

namespace stallscope::analyzer::multirank {

namespace {

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

// Instants near-simultaneous on two ranks of different hosts: completions
// of the same (comm, seq), on communicators both took part in. The two
// ranks' collectives (each in arrival order) are walked together at the same
// pace through their lists, so the instances waiting for their match are the
// ranks' skew, not the run; beyond 8,192 points the points are decimated.
struct Matched {
  size_t n = 0;
  Decimated<std::pair<int64_t, int64_t>> pts{8192};  // (t, d): t on rank b, d = ref − t
};

Matched match_completions(const RankReport& ref, const RankClock& cref, const RankReport& b,
                          const RankClock& cb, const std::vector<uint64_t>& shared) {
  struct KeyHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& k) const noexcept {
      return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ULL ^ k.second);
    }
  };
  using Waiting = std::unordered_map<std::pair<uint64_t, uint64_t>, int64_t, KeyHash>;
  constexpr size_t kMaxWaiting = size_t{1} << 16;
  Matched m;
  Waiting wait_ref, wait_b;  // completions not matched yet, by (comm, seq)
  auto in_shared = [&](uint64_t comm) {
    return std::binary_search(shared.begin(), shared.end(), comm);
  };
  size_t i = 0, j = 0;
  const auto &cs_ref = ref.collectives, &cs_b = b.collectives;
  while (i < cs_ref.size() || j < cs_b.size()) {
    // The one that has gone through less of its list goes next: no clock
    // needed (a rank without a wall clock may be hours off).
    const bool take_ref =
        j == cs_b.size() || (i < cs_ref.size() && static_cast<double>(i) * static_cast<double>(cs_b.size()) <=
                                                      static_cast<double>(j) * static_cast<double>(cs_ref.size()));
    const CollectiveInstance c = take_ref ? cs_ref[i++] : cs_b[j++];
    if (!in_shared(c.comm_id)) continue;
    const std::pair<uint64_t, uint64_t> k{c.comm_id, c.seq};
    Waiting& other = take_ref ? wait_b : wait_ref;
    Waiting& mine = take_ref ? wait_ref : wait_b;
    const int64_t t = (take_ref ? cref : cb).to_common(c.end_ns);
    if (const auto it = other.find(k); it != other.end()) {
      const int64_t tr = take_ref ? t : it->second, tb = take_ref ? it->second : t;
      m.pts.add({tb, tr - tb});
      ++m.n;
      other.erase(it);
      continue;
    }
    if (mine.size() >= kMaxWaiting) mine.clear();  // the other rank lost these: start afresh
    mine.emplace(k, t);
  }
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
                            std::vector<RankClock>* clocks, const RankComms* known_comms) {
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
  const RankComms comms = known_comms != nullptr ? *known_comms : rank_comms(ranks);
  std::map<std::string, LineFit> fits;
  double worst = 0;
  for (const auto& [host, i] : reps) {
    ClockAlignment::Host h{host, 0, 0, 0, 0};
    if (i != ref) {
      std::vector<uint64_t> shared;
      std::set_intersection(comms[ref].begin(), comms[ref].end(), comms[i].begin(),
                            comms[i].end(), std::back_inserter(shared));
      Matched m = match_completions(ranks[ref], (*clocks)[ref], ranks[i], (*clocks)[i], shared);
      h.matched = m.n;
      if (m.n > 0) {
        const LineFit f = fit_offset(m.pts.values(), opt);
        fits[host] = f;
        h.offset_ms = f.a / 1e6;
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
