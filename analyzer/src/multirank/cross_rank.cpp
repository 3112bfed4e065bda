// The cross-rank pass: clocks, straggler wait, then the per-rank and
// run-wide figures the reports show (imbalance, top causes, one summary).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "../summary.hpp"
#include "cross_render.hpp"
#include "multirank_internal.hpp"

namespace stallscope::analyzer {

namespace {

// Statistics of the two parts the straggler pass moves time between
// (transfer → straggler wait), over steady steps, again. The other parts,
// and the steady wall time the shares are taken of, did not change.
void resummarize_parts(RankReport& r) {
  if (r.cross.waited_ns == 0) return;  // nothing moved in this rank
  int64_t total = 0;
  constexpr Part kMoved[] = {Part::kCommTransfer, Part::kStragglerWait};
  std::vector<Decimated<int64_t>> v(2, Decimated<int64_t>(kSampleCap));
  for (const Part part : kMoved) r.parts[idx(part)].total_ns = 0;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepResult& s = r.steps.peek(i);
    if (s.warmup) continue;
    total += s.wall();
    for (size_t k = 0; k < 2; ++k) {
      v[k].add(s.parts[idx(kMoved[k])]);
      r.parts[idx(kMoved[k])].total_ns += s.parts[idx(kMoved[k])];
    }
  }
  for (size_t k = 0; k < 2; ++k) {
    PartStat& ps = r.parts[idx(kMoved[k])];
    ps.share = total > 0 ? static_cast<double>(ps.total_ns) / static_cast<double>(total) : 0;
    p50_p90_ms(v[k].values(), ps.p50_ms, ps.p90_ms);
  }
}

std::string top_cause(const RankReport& r) {
  size_t best = 0;
  for (size_t p = 1; p < kPartCount; ++p)
    if (r.parts[p].total_ns > r.parts[best].total_ns) best = p;
  return r.parts[best].total_ns > 0 ? std::string(part_label(static_cast<Part>(best))) : "";
}

double max_over_median(const std::vector<RankReport>& ranks) {
  std::vector<double> v;
  for (const auto& r : ranks)
    if (r.steady_steps > 0) v.push_back(r.step_p50_ms);
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double med = v[v.size() / 2];
  return med > 0 ? v.back() / med : 0;
}

// The verdict class of a rank's cause ("communication-bound" of
// "communication-bound: comm transfer 31 % of step time").
std::string verdict_class(const std::string& cause) {
  const size_t colon = cause.find(": ");
  return colon == std::string::npos ? cause : cause.substr(0, colon);
}

// The part a rank's cause names after its class, or kPartCount.
size_t cause_part(const std::string& cause) {
  const size_t colon = cause.find(": ");
  if (colon == std::string::npos) return kPartCount;
  const std::string detail = cause.substr(colon + 2);
  size_t best = kPartCount, best_len = 0;  // the longest label that starts the detail
  for (size_t p = 0; p < kPartCount; ++p) {
    const std::string label(part_label(static_cast<Part>(p)));
    if (detail.rfind(label + " ", 0) == 0 && label.size() > best_len) best = p, best_len = label.size();
  }
  return best;
}

// The run's verdict in the per-rank reports' words: "communication-bound
// on all 8 ranks: comm transfer 31 % of step time (median over ranks)" when
// every rank has the same class (and part), else the classes counted.
std::string run_verdict(const std::vector<RankReport>& ranks) {
  std::map<std::string, size_t> classes;
  std::set<size_t> parts;
  std::vector<double> shares;
  size_t steady = 0;
  for (const auto& r : ranks) {
    if (r.steady_steps == 0) continue;
    ++steady;
    ++classes[verdict_class(r.cause)];
    const size_t p = cause_part(r.cause);
    parts.insert(p);
    if (p < kPartCount) shares.push_back(r.parts[p].share);
  }
  if (steady == 0) return "no steady steps";
  char buf[200];
  if (classes.size() == 1) {
    std::string v = classes.begin()->first + " on " +
                    (steady == ranks.size() ? "all " : "") + std::to_string(steady) + " ranks";
    if (parts.size() == 1 && *parts.begin() < kPartCount && !shares.empty()) {
      std::sort(shares.begin(), shares.end());
      std::snprintf(buf, sizeof buf, ": %s %.0f %% of step time (median over ranks)",
                    std::string(part_label(static_cast<Part>(*parts.begin()))).c_str(),
                    100 * shares[shares.size() / 2]);
      v += buf;
    }
    return v;
  }
  std::vector<std::pair<std::string, size_t>> v(classes.begin(), classes.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out = "mixed verdicts:";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : " ") + std::to_string(v[i].second) + (v[i].second == 1 ? " rank " : " ranks ") +
           v[i].first;
  return out;
}

// The verdict first, then what the ranks waited for at collectives.
std::string summary_line(const CrossRank& c) {
  char buf[320];
  if (!c.stragglers.empty()) {
    const Straggler& s = c.stragglers.front();
    std::snprintf(
        buf, sizeof buf,
        "straggler: rank %lld (%s) arrived last at %llu of %llu collectives, by %.1f ms (median); "
        "the others waited %s for it in all; its cause: %s",
        static_cast<long long>(s.rank), s.host.c_str(),
        static_cast<unsigned long long>(s.times_last), static_cast<unsigned long long>(s.instances),
        s.median_margin_ms, total_wait_text(s.caused_ns).c_str(), s.cause.c_str());
  } else if (c.instances == 0) {
    std::snprintf(buf, sizeof buf,
                  "%zu ranks; no collective matched across ranks: no straggler analysis", c.ranks);
  } else {
    std::snprintf(buf, sizeof buf, "no straggler among %zu ranks (arrival skew p50 %.2f ms)%s%s",
                  c.ranks, c.arrival_skew_p50_ms, c.common_cause.empty() ? "" : "; ",
                  c.common_cause.c_str());
  }
  return buf;
}

// collectives_below_link judges collectives against the GPU's NVLink or
// PCIe link; a communicator with members on other hosts also crosses the
// network, so a rank in one gets no such remedy (a rank analyzed alone
// cannot tell, and the rule only guesses from the rank count).
void drop_below_link_across_hosts(std::vector<RankReport>& ranks, const multirank::RankComms& comms) {
  std::map<uint64_t, std::set<std::string>> hosts;  // comm -> hosts of its members
  for (size_t i = 0; i < ranks.size(); ++i)
    for (const uint64_t comm : comms[i]) hosts[comm].insert(ranks[i].host);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const bool across = std::any_of(comms[i].begin(), comms[i].end(),
                                    [&](uint64_t comm) { return hosts[comm].size() > 1; });
    if (!across) continue;
    auto& v = ranks[i].remedies;
    v.erase(std::remove_if(v.begin(), v.end(),
                           [](const Remedy& m) { return m.kind == RemedyId::kCollectivesBelowLink; }),
            v.end());
  }
}

}  // namespace

std::string total_wait_text(int64_t ns) {
  char buf[48];
  const double ms = static_cast<double>(ns) / 1e6;
  if (ms < 10000) std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  else std::snprintf(buf, sizeof buf, "%.1f s", ms / 1e3);
  return buf;
}

void analyze_cross_rank(Report& r, const CrossRankOptions& opt) {
  if (r.ranks.size() < 2) return;
  CrossRank& c = r.cross;
  c = CrossRank{};
  c.present = true;
  c.ranks = r.ranks.size();
  std::vector<multirank::RankClock> clocks;
  const multirank::RankComms comms = multirank::rank_comms(r.ranks);
  c.clock = multirank::align_clocks(r.ranks, opt, &clocks, &comms);
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    RankReport& rk = r.ranks[i];
    rk.cross = RankCross{};
    const int64_t t = rk.steps.empty() ? 0 : rk.steps.front().start_ns;
    rk.cross.clock_offset_ns = clocks[i].to_common(t) - t;
  }
  multirank::attribute_stragglers(r, clocks, opt, &comms);
  for (auto& rk : r.ranks) {
    resummarize_parts(rk);
    rk.cross.top_cause = top_cause(rk);
  }
  for (auto& rk : r.ranks) multirank::refresh_verdict(rk, c);
  drop_below_link_across_hosts(r.ranks, comms);
  c.step_max_over_median = max_over_median(r.ranks);
  c.verdict = run_verdict(r.ranks);
  c.summary = c.verdict + "; " + summary_line(c);
  if (c.clock.method == "wall_clock_only") r.warnings.push_back(c.clock.note);
}

}  // namespace stallscope::analyzer
