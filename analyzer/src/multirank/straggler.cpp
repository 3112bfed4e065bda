// Straggler attribution (DESIGN.md "How a step is attributed", 2a): at each
// collective instance every rank waits from its own arrival to the last
// rank's; that wait, where it is exposed, moves from comm transfer to
// straggler wait and is charged to the last rank and to its own cause in the
// step (the part in which it exceeded the ranks' median the most).
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "multirank_internal.hpp"

namespace stallscope::analyzer::multirank {

namespace {

// A straggler's own stage must sustain less than this share of the median
// rank's rate (DESIGN.md "Scale": its own cause, not a phase lag).
constexpr double kSlowerStage = 0.8;

struct Arrival {
  uint64_t comm, seq;
  int64_t t;  // common time base
  uint32_t rank, inst;
};

bool comm_part(size_t p) { return p == idx(Part::kStragglerWait) || p == idx(Part::kCommTransfer); }

// Median of each part over `group` (the ranks' steps of one index).
PartNs median_parts(const std::vector<const PartNs*>& group, std::vector<int64_t>& v) {
  PartNs m{};
  for (size_t p = 0; p < kPartCount; ++p) {
    v.clear();
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const PartNs* parts : group) {
      const int64_t x = (*parts)[p];
      v.push_back(x);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    if (lo == hi) {  // a part every rank has the same of (often none at all)
      m[p] = lo;
      continue;
    }
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    m[p] = v[v.size() / 2];
  }
  return m;
}

// True when every rank has the same step indices in the same order (the
// usual case): the steps of one index are then at one position.
bool same_step_indices(const std::vector<RankReport>& ranks) {
  for (const auto& r : ranks) {
    if (r.steps.size() != ranks.front().steps.size()) return false;
    for (size_t k = 0; k < r.steps.size(); ++k)
      if (r.steps[k].index != ranks.front().steps[k].index) return false;
  }
  return true;
}

// Median of each part over the ranks' steps with the same index.
std::unordered_map<uint64_t, PartNs> step_medians(const std::vector<RankReport>& ranks) {
  std::unordered_map<uint64_t, PartNs> out;
  std::vector<int64_t> v;
  std::vector<const PartNs*> group;
  if (same_step_indices(ranks)) {
    const size_t n = ranks.front().steps.size();
    out.reserve(n);
    for (size_t k = 0; k < n; ++k) {
      group.clear();
      for (const auto& r : ranks) group.push_back(&r.steps[k].parts);
      out[ranks.front().steps[k].index] = median_parts(group, v);
    }
    return out;
  }
  std::vector<std::pair<uint64_t, const PartNs*>> all;
  for (const auto& r : ranks)
    for (const auto& s : r.steps) all.emplace_back(s.index, &s.parts);
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    group.clear();
    for (; j < all.size() && all[j].first == all[i].first; ++j) group.push_back(all[j].second);
    out[all[i].first] = median_parts(group, v);
    i = j;
  }
  return out;
}

// Position of the step starting at `start` (steps sorted by start), or npos.
size_t step_pos(const RankReport& r, int64_t start) {
  auto it = std::lower_bound(r.steps.begin(), r.steps.end(), start,
                             [](const StepResult& s, int64_t t) { return s.start_ns < t; });
  if (it == r.steps.end() || it->start_ns != start) return SIZE_MAX;
  return static_cast<size_t>(it - r.steps.begin());
}

Part cause_part(const StepResult& s, const std::unordered_map<uint64_t, PartNs>& med) {
  const auto it = med.find(s.index);
  size_t best = SIZE_MAX, top = SIZE_MAX;
  int64_t best_excess = 0, top_ns = -1;
  for (size_t p = 0; p < kPartCount; ++p) {
    if (comm_part(p)) continue;
    const int64_t excess = s.parts[p] - (it == med.end() ? 0 : it->second[p]);
    if (excess > best_excess) best_excess = excess, best = p;
    if (s.parts[p] > top_ns) top_ns = s.parts[p], top = p;
  }
  return static_cast<Part>(best != SIZE_MAX ? best : top);
}

int64_t exposed_within(const RankReport& r, const CollectiveInstance& c, int64_t a, int64_t b) {
  int64_t n = 0;
  for (uint32_t i = 0; i < c.exposed_n; ++i) {
    const auto& x = r.collective_exposed[c.exposed_at + i];
    n += std::max<int64_t>(0, std::min(x.second, b) - std::max(x.first, a));
  }
  return n;
}

struct Tally {
  std::vector<std::vector<int64_t>> extra;      // per rank, per step: wait to move
  std::vector<std::vector<int64_t>> margins;    // per rank: lead over the second last, when last
  std::vector<std::map<Part, int64_t>> causes;  // per rank: wait it caused, by its cause
  std::map<Part, int64_t> all_causes;
  std::vector<int64_t> spreads, others_spread;
};

// Every rank's arrivals in the common time base, sorted by (comm, seq, t,
// rank). Sequence numbers count up from 0 on each communicator, so each
// (comm, seq) group gets its place by counting, and only each group — one
// instance's arrivals — is sorted by time. Sparse sequence numbers fall
// back to one full sort.
std::vector<Arrival> arrivals(const std::vector<RankReport>& ranks,
                              const std::vector<RankClock>& clocks) {
  auto by_time = [](const Arrival& a, const Arrival& b) {
    return std::tie(a.t, a.rank) < std::tie(b.t, b.rank);
  };
  auto arrival = [&](size_t r, size_t i) {
    const auto& c = ranks[r].collectives[i];
    return Arrival{c.comm_id, c.seq, clocks[r].to_common(c.arrival_ns), static_cast<uint32_t>(r),
                   static_cast<uint32_t>(i)};
  };
  struct Range {
    uint64_t comm, lo, hi;
    size_t base = 0;
  };
  std::vector<Range> comms;
  std::unordered_map<uint64_t, size_t> at;
  size_t n = 0;
  for (const auto& rk : ranks)
    for (const auto& c : rk.collectives) {
      auto [it, fresh] = at.try_emplace(c.comm_id, comms.size());
      if (fresh) comms.push_back({c.comm_id, c.seq, c.seq});
      Range& g = comms[it->second];
      g.lo = std::min(g.lo, c.seq);
      g.hi = std::max(g.hi, c.seq);
      ++n;
    }
  std::vector<size_t> order(comms.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return comms[a].comm < comms[b].comm; });
  size_t slots = 0;
  bool dense = true;
  for (const size_t i : order) {
    comms[i].base = slots;
    slots += comms[i].hi - comms[i].lo + 1;
    if (slots > 2 * n + 1024) dense = false;  // counting would cost more than sorting
    if (!dense) break;
  }
  std::vector<Arrival> v;
  v.reserve(n);
  if (!dense) {
    for (size_t r = 0; r < ranks.size(); ++r)
      for (size_t i = 0; i < ranks[r].collectives.size(); ++i) v.push_back(arrival(r, i));
    std::sort(v.begin(), v.end(), [&](const Arrival& a, const Arrival& b) {
      return std::tie(a.comm, a.seq) != std::tie(b.comm, b.seq)
                 ? std::tie(a.comm, a.seq) < std::tie(b.comm, b.seq)
                 : by_time(a, b);
    });
    return v;
  }
  auto slot = [&](const CollectiveInstance& c) {
    const Range& g = comms[at.find(c.comm_id)->second];
    return g.base + (c.seq - g.lo);
  };
  std::vector<uint32_t> start(slots + 1, 0);
  for (const auto& rk : ranks)
    for (const auto& c : rk.collectives) ++start[slot(c) + 1];
  for (size_t k = 0; k < slots; ++k) start[k + 1] += start[k];
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  v.resize(n);
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t i = 0; i < ranks[r].collectives.size(); ++i)
      v[fill[slot(ranks[r].collectives[i])]++] = arrival(r, i);
  for (size_t k = 0; k < slots; ++k)
    if (start[k + 1] - start[k] > 1)
      std::sort(v.begin() + start[k], v.begin() + start[k + 1], by_time);
  return v;
}

// One instance: arrivals g[0..n) sorted by time.
void tally_instance(std::vector<RankReport>& ranks, const Arrival* g, size_t n,
                    const std::unordered_map<uint64_t, PartNs>& med, Tally& t) {
  const Arrival& last = g[n - 1];
  t.spreads.push_back(last.t - g[0].t);
  t.others_spread.push_back(g[n - 2].t - g[0].t);
  for (size_t k = 0; k < n; ++k) ++ranks[g[k].rank].cross.instances;
  if (last.t == g[n - 2].t) return;  // a tie: nobody was last
  RankReport& lr = ranks[last.rank];
  ++lr.cross.times_last;
  t.margins[last.rank].push_back(last.t - g[n - 2].t);
  int64_t caused = 0;
  for (size_t k = 0; k + 1 < n; ++k) {
    RankReport& r = ranks[g[k].rank];
    const CollectiveInstance& c = r.collectives[g[k].inst];
    const size_t pos = step_pos(r, c.step_start_ns);
    if (pos == SIZE_MAX) continue;
    const int64_t w = exposed_within(r, c, c.arrival_ns, c.arrival_ns + (last.t - g[k].t));
    t.extra[g[k].rank][pos] += w;
    caused += w;
  }
  const CollectiveInstance& lc = lr.collectives[last.inst];
  const size_t lpos = step_pos(lr, lc.step_start_ns);
  if (caused == 0 || lpos == SIZE_MAX) return;
  const Part why = cause_part(lr.steps[lpos], med);
  lr.cross.caused_ns += caused;
  t.causes[last.rank][why] += caused;
  t.all_causes[why] += caused;
}

// Moves the tallied wait from transfer into straggler wait, step by step.
int64_t move_waits(std::vector<RankReport>& ranks, const Tally& t) {
  int64_t total = 0;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t s = 0; s < ranks[r].steps.size(); ++s) {
      PartNs& p = ranks[r].steps[s].parts;
      const int64_t m = std::min(t.extra[r][s], p[idx(Part::kCommTransfer)]);
      p[idx(Part::kCommTransfer)] -= m;
      p[idx(Part::kStragglerWait)] += m;
      ranks[r].cross.waited_ns += m;
      total += m;
    }
  return total;
}

int64_t median_ns(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double pct_ms(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]) / 1e6;
}

std::vector<std::pair<std::string, int64_t>> ranked_causes(const std::map<Part, int64_t>& m) {
  std::map<std::string, int64_t> words;
  for (const auto& [p, ns] : m) words[cause_word(p)] += ns;
  std::vector<std::pair<std::string, int64_t>> v(words.begin(), words.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

// The input stage a cause word stands for ("" for causes without one).
std::string stage_of(const std::string& cause) {
  return cause == "storage" || cause == "preprocessing" ? cause : "";
}

double stage_capacity(const RankReport& r, const std::string& stage) {
  for (const auto& st : r.stages)
    if (st.name == stage && st.measured) return st.capacity;
  return 0;
}

// Whether rank r's own stage behind `cause` is slower than the other ranks'
// (or cannot be compared). A rank whose storage is as fast as everyone's but
// that arrives last every time lags by a constant phase (its pipeline started
// later and never caught up): not a slow rank, the same cause as the others.
bool own_stage_slower(const std::vector<RankReport>& ranks, size_t r, const std::string& cause) {
  const std::string stage = stage_of(cause);
  const double mine = stage.empty() ? 0 : stage_capacity(ranks[r], stage);
  if (mine <= 0) return true;
  std::vector<double> others;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (i != r && stage_capacity(ranks[i], stage) > 0)
      others.push_back(stage_capacity(ranks[i], stage));
  if (others.empty()) return true;
  std::nth_element(others.begin(), others.begin() + static_cast<long>(others.size() / 2),
                   others.end());
  return mine < kSlowerStage * others[others.size() / 2];
}

void name_stragglers(Report& rep, const Tally& t, const CrossRankOptions& opt) {
  auto& ranks = rep.ranks;
  const double n_ranks = static_cast<double>(ranks.size());
  const int64_t spread = median_ns(t.others_spread);
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankCross& c = ranks[r].cross;
    c.p_value = binomial_tail(c.instances, c.times_last, 1.0 / n_ranks);
    c.median_margin_ms = static_cast<double>(median_ns(t.margins[r])) / 1e6;
    const int64_t margin = median_ns(t.margins[r]);
    if (c.p_value >= opt.alpha / n_ranks || margin < opt.min_margin_ns ||
        static_cast<double>(margin) < opt.margin_factor * static_cast<double>(spread))
      continue;
    Straggler s;
    s.rank = ranks[r].rank;
    s.host = ranks[r].host;
    s.times_last = c.times_last;
    s.instances = c.instances;
    s.p_value = c.p_value;
    s.median_margin_ms = c.median_margin_ms;
    s.caused_ns = c.caused_ns;
    s.causes = ranked_causes(t.causes[r]);
    s.cause = s.causes.empty() ? "unknown" : s.causes.front().first;
    if (!own_stage_slower(ranks, r, s.cause)) continue;
    rep.cross.stragglers.push_back(std::move(s));
  }
  std::sort(rep.cross.stragglers.begin(), rep.cross.stragglers.end(),
            [](const Straggler& a, const Straggler& b) { return a.caused_ns > b.caused_ns; });
}

}  // namespace

double binomial_tail(uint64_t n, uint64_t k, double p) {
  if (k == 0) return 1;
  if (k > n) return 0;
  const double lp = std::log(p), lq = std::log1p(-p);
  double sum = 0;
  for (uint64_t i = k; i <= n; ++i) {
    const double di = static_cast<double>(i), dn = static_cast<double>(n);
    const double lt = std::lgamma(dn + 1) - std::lgamma(di + 1) - std::lgamma(dn - di + 1) +
                      di * lp + (dn - di) * lq;
    sum += std::exp(lt);
    if (lt < -745 && di > dn * p) break;  // the rest underflows
  }
  return std::min(1.0, sum);
}

std::string cause_word(Part p) {
  if (part_group(p) == "host") return "host";
  return std::string(part_label(p));
}

void attribute_stragglers(Report& rep, const std::vector<RankClock>& clocks,
                          const CrossRankOptions& opt) {
  auto& ranks = rep.ranks;
  Tally t;
  t.extra.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) t.extra[r].assign(ranks[r].steps.size(), 0);
  t.margins.resize(ranks.size());
  t.causes.resize(ranks.size());
  const auto med = step_medians(ranks);
  const auto all = arrivals(ranks, clocks);
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].comm == all[i].comm && all[j].seq == all[i].seq) ++j;
    if (j - i >= 2) {
      tally_instance(ranks, &all[i], j - i, med, t);
      ++rep.cross.instances;
    }
    i = j;
  }
  rep.cross.straggler_wait_ns = move_waits(ranks, t);
  rep.cross.arrival_skew_p50_ms = pct_ms(t.spreads, 0.5);
  rep.cross.arrival_skew_p90_ms = pct_ms(t.spreads, 0.9);
  name_stragglers(rep, t, opt);
  const auto common = ranked_causes(t.all_causes);
  if (rep.cross.stragglers.empty() && !common.empty())
    rep.cross.common_cause = "all ranks: " + common.front().first;
}

}  // namespace stallscope::analyzer::multirank
