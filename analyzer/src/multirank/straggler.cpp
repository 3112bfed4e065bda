// Straggler attribution (DESIGN.md "How a step is attributed", 2a): at each
// collective instance every rank waits from its own arrival to the last
// rank's; that wait, where it is exposed, moves from comm transfer to
// straggler wait and is charged to the last rank and to its own cause in the
// step (the part in which it exceeded the ranks' median the most).
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

#include "multirank_internal.hpp"

namespace stallscope::analyzer::multirank {

namespace {

// A straggler's own stage must sustain less than this share of the median
// rank's rate (DESIGN.md "Scale": its own cause, not a phase lag).
constexpr double kSlowerStage = 0.8;

struct Arrival {
  int64_t t;  // common time base
  uint32_t rank;
  uint32_t exposed_at, exposed_n;  // the instance's, on this rank
  int64_t arrival_ns, step_start_ns;
};

struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& k) const noexcept {
    return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ULL ^ k.second);
  }
};
using Key = std::pair<uint64_t, uint64_t>;  // (comm, seq)

bool comm_part(size_t p) { return p == idx(Part::kStragglerWait) || p == idx(Part::kCommTransfer); }

// The first position in [0, n) whose key is not below `x`, keys
// non-decreasing, searched outwards from `h` in doubling strides: a step
// near the hint costs a few reads near it, and a table that keeps only a
// few chunks in memory is not read end to end.
template <typename Key>
size_t gallop(size_t n, size_t h, Key key, decltype(key(0)) x) {
  if (n == 0) return 0;
  h = std::min(h, n - 1);
  size_t lo = 0, hi = n;  // key(lo - 1) < x <= key(hi), as far as known
  if (key(h) < x) {
    lo = h + 1;
    for (size_t step = 1; lo < n; step *= 2) {
      const size_t probe = std::min(n - 1, h + step);
      if (!(key(probe) < x)) {
        hi = probe;
        break;
      }
      lo = probe + 1;
    }
  } else {
    hi = h;
    for (size_t step = 1; hi > 0; step *= 2) {
      const size_t probe = h >= step ? h - step : 0;
      if (key(probe) < x) {
        lo = probe + 1;
        break;
      }
      hi = probe;
      if (probe == 0) break;
    }
  }
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (key(mid) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Where each rank keeps a step, found from a hint (the last position found):
// the collectives are walked in time order, so the step is almost always at
// the hint or near it.
class RankStepCursor {
 public:
  explicit RankStepCursor(const std::vector<RankReport>& ranks)
      : ranks_(ranks), hint_(ranks.size(), 0) {}
  // Position of rank r's step starting at `start` (steps sorted by start), or SIZE_MAX.
  size_t by_start(size_t r, int64_t start) {
    const auto& st = ranks_[r].steps;
    const size_t pos = gallop(st.size(), hint_[r],
                              [&](size_t i) { return st.peek(i).start_ns; }, start);
    if (pos == st.size() || st.peek(pos).start_ns != start) return SIZE_MAX;
    return hint_[r] = pos;
  }
  // Position of rank r's step of `index`, or SIZE_MAX. Step indices increase
  // along the steps (in start order) on every rank but a broken one; there
  // the search may miss, and the rank is left out of that step's median.
  size_t by_index(size_t r, uint64_t index) {
    const auto& st = ranks_[r].steps;
    if (st.empty()) return SIZE_MAX;
    // Indices usually count up by one: the step is as far from the hint as
    // its index is from the hint's.
    const size_t h = std::min(hint_[r], st.size() - 1);
    const uint64_t at = st.peek(h).index;
    const size_t guess = index >= at ? h + static_cast<size_t>(index - at)
                                     : (at - index <= h ? h - static_cast<size_t>(at - index) : SIZE_MAX);
    if (guess < st.size() && st.peek(guess).index == index) return guess;
    const size_t pos = gallop(st.size(), h, [&](size_t i) { return st.peek(i).index; }, index);
    return pos < st.size() && st.peek(pos).index == index ? pos : SIZE_MAX;
  }

 private:
  const std::vector<RankReport>& ranks_;
  std::vector<size_t> hint_;
};

// Median of each part over the ranks' steps with one index, computed when
// first asked for — only the parts asked for — and kept for a while.
class StepMedians {
 public:
  StepMedians(const std::vector<RankReport>& ranks, RankStepCursor& find) : ranks_(ranks), find_(find) {}
  // The medians of `index`; those of the parts in `want` (bit p = part p)
  // are filled in. Null when no rank has a step of that index.
  const PartNs* get(uint64_t index, uint32_t want) {
    auto it = cache_.find(index);
    if (it != cache_.end() && (it->second.have & want) == want) return &it->second.m;
    pos_.clear();
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (const size_t pos = find_.by_index(r, index); pos != SIZE_MAX) pos_.emplace_back(r, pos);
    if (pos_.empty()) return nullptr;
    if (it == cache_.end()) {
      if (cache_.size() >= kKeep) cache_.clear();
      it = cache_.try_emplace(index).first;
    }
    Entry& e = it->second;
    for (size_t p = 0; p < kPartCount; ++p) {
      if ((want >> p & 1) == 0 || (e.have >> p & 1) != 0) continue;
      v_.clear();
      for (const auto& [r, pos] : pos_) v_.push_back(ranks_[r].steps.peek(pos).parts[p]);
      std::nth_element(v_.begin(), v_.begin() + static_cast<long>(v_.size() / 2), v_.end());
      e.m[p] = v_[v_.size() / 2];
      e.have |= uint32_t{1} << p;
    }
    return &e.m;
  }

 private:
  static constexpr size_t kKeep = 4096;
  struct Entry {
    PartNs m{};
    uint32_t have = 0;  // parts filled in
  };
  const std::vector<RankReport>& ranks_;
  RankStepCursor& find_;
  std::unordered_map<uint64_t, Entry> cache_;
  std::vector<std::pair<size_t, size_t>> pos_;  // (rank, position) of the index's steps
  std::vector<int64_t> v_;
};

// The parts a step's cause can be (cause_part): those it has, comm parts
// aside — a part it has none of cannot exceed a median.
uint32_t cause_candidates(const StepResult& s) {
  uint32_t m = 0;
  for (size_t p = 0; p < kPartCount; ++p)
    if (!comm_part(p) && s.parts[p] > 0) m |= uint32_t{1} << p;
  return m;
}

// The part in which the step exceeds the ranks' median the most (comm parts
// aside), else its largest.
Part cause_part(const StepResult& s, const PartNs* med) {
  size_t best = SIZE_MAX, top = SIZE_MAX;
  int64_t best_excess = 0, top_ns = -1;
  for (size_t p = 0; p < kPartCount; ++p) {
    if (comm_part(p)) continue;
    const int64_t excess = s.parts[p] - (med == nullptr ? 0 : (*med)[p]);
    if (excess > best_excess) best_excess = excess, best = p;
    if (s.parts[p] > top_ns) top_ns = s.parts[p], top = p;
  }
  return static_cast<Part>(best != SIZE_MAX ? best : top);
}

int64_t exposed_within(const RankReport& r, const Arrival& c, int64_t a, int64_t b) {
  int64_t n = 0;
  for (uint32_t i = 0; i < c.exposed_n; ++i) {
    const auto& x = r.collective_exposed.peek(c.exposed_at + i);
    n += std::max<int64_t>(0, std::min(x.second, b) - std::max(x.first, a));
  }
  return n;
}

struct Tally {
  explicit Tally(size_t ranks) : margins(ranks, Decimated<int64_t>(4096)), causes(ranks) {}
  std::vector<Decimated<int64_t>> margins;      // per rank: lead over the second last, when last
  std::vector<std::map<Part, int64_t>> causes;  // per rank: wait it caused, by its cause
  std::map<Part, int64_t> all_causes;
  Decimated<int64_t> spreads{65536}, others_spread{65536};
  int64_t moved = 0;  // straggler wait, all ranks
};

// The ranks' collectives walked together, each rank through its list (in
// arrival order) at the same pace: in round k every rank reaches k/n of its
// list. The arrivals of one (comm, seq) are gathered until every rank of the
// communicator has arrived (or kMaxAge rounds have passed, or at the end).
// Memory holds the open instances only — the ranks' skew, not the run's
// length — and no clock is needed to pace the walk.
//
// A closed instance names its last rank at once; the waits it caused are
// moved at the end of the round, rank by rank (each rank's steps and
// exposed intervals are then read in order, not one rank after another per
// instance). Each waiting rank's wait, where its collective was exposed,
// moves from comm transfer to straggler wait in its step: moving
// min(w, transfer left) wait by wait moves min(Σ w, transfer) in all.
class Walk {
 public:
  static constexpr size_t kPerRound = 64;   // the longest list's collectives per round
  static constexpr uint64_t kMaxAge = 256;  // rounds an instance stays open
  static constexpr size_t kMaxOpen = size_t{1} << 18;

  Walk(Report& rep, const std::vector<RankClock>& clocks, const RankComms& comms)
      : rep_(rep), ranks_(rep.ranks), clocks_(clocks), next_(ranks_.size(), 0),
        waits_(ranks_.size()), find_(ranks_), med_(ranks_, find_), t_(ranks_.size()) {
    for (const auto& of_rank : comms)
      for (const uint64_t c : of_rank) ++members_[c];
  }

  Tally run() {
    size_t longest = 0;
    for (const auto& r : ranks_) longest = std::max(longest, r.collectives.size());
    const uint64_t rounds = (longest + kPerRound - 1) / kPerRound;
    for (round_ = 1; round_ <= rounds; ++round_) {
      for (size_t r = 0; r < ranks_.size(); ++r) {
        const auto& cs = ranks_[r].collectives;
        const size_t until = static_cast<size_t>(
            (uint64_t{cs.size()} * round_ + rounds - 1) / rounds);
        for (; next_[r] < until; ++next_[r]) {
          const CollectiveInstance& c = cs.peek(next_[r]);
          add(c, Arrival{clocks_[r].to_common(c.arrival_ns), static_cast<uint32_t>(r), c.exposed_at,
                         c.exposed_n, c.arrival_ns, c.step_start_ns});
        }
      }
      if (round_ > kMaxAge) expire(round_ - kMaxAge);
      move_waits();
    }
    expire(UINT64_MAX);
    move_waits();
    return std::move(t_);
  }

 private:
  struct Open {
    std::vector<Arrival> a;
    uint64_t opened = 0;  // round
  };

  void add(const CollectiveInstance& c, const Arrival& x) {
    const Key k{c.comm_id, c.seq};
    auto [it, fresh] = open_.try_emplace(k);
    Open& o = it->second;
    if (fresh) o.opened = round_;
    o.a.push_back(x);
    if (o.a.size() >= members_[c.comm_id]) {
      close(o);
      open_.erase(it);
    } else if (open_.size() > kMaxOpen) {
      expire(round_);  // a safety valve: everything opened before this round
    }
  }

  // Tallies every open instance opened before round `before`, in (comm, seq) order.
  void expire(uint64_t before) {
    keys_.clear();
    for (const auto& [k, o] : open_)
      if (o.opened < before) keys_.push_back(k);
    std::sort(keys_.begin(), keys_.end());
    for (const Key& k : keys_) {
      const auto it = open_.find(k);
      close(it->second);
      open_.erase(it);
    }
  }

  // An instance: spreads and who was last now; its waits go to the ranks'
  // lists for move_waits.
  void close(Open& o) {
    const size_t n = o.a.size();
    if (n < 2) return;
    ++rep_.cross.instances;
    std::sort(o.a.begin(), o.a.end(), [](const Arrival& a, const Arrival& b) {
      return std::tie(a.t, a.rank) < std::tie(b.t, b.rank);
    });
    const Arrival* g = o.a.data();
    const Arrival& last = g[n - 1];
    t_.spreads.add(last.t - g[0].t);
    t_.others_spread.add(g[n - 2].t - g[0].t);
    for (size_t k = 0; k < n; ++k) ++ranks_[g[k].rank].cross.instances;
    if (last.t == g[n - 2].t) return;  // a tie: nobody was last
    ++ranks_[last.rank].cross.times_last;
    t_.margins[last.rank].add(last.t - g[n - 2].t);
    const auto id = static_cast<uint32_t>(closed_.size());
    closed_.push_back({last, 0});
    for (size_t k = 0; k + 1 < n; ++k)
      waits_[g[k].rank].push_back({id, g[k], g[k].arrival_ns + (last.t - g[k].t)});
  }

  // The waits of the instances closed since the last call, rank by rank;
  // then each instance's wait in all is charged to its last rank's cause.
  void move_waits() {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankReport& rk = ranks_[r];
      for (const Wait& w : waits_[r]) {
        const size_t pos = find_.by_start(r, w.a.step_start_ns);
        if (pos == SIZE_MAX) continue;
        const int64_t ns = exposed_within(rk, w.a, w.a.arrival_ns, w.until);
        closed_[w.instance].caused += ns;
        if (ns <= 0) continue;
        const int64_t m = std::min(ns, rk.steps.peek(pos).parts[idx(Part::kCommTransfer)]);
        if (m <= 0) continue;
        PartNs& p = rk.steps.edit(pos).parts;
        p[idx(Part::kCommTransfer)] -= m;
        p[idx(Part::kStragglerWait)] += m;
        rk.cross.waited_ns += m;
        t_.moved += m;
      }
      waits_[r].clear();
    }
    for (const Closed& c : closed_) {
      if (c.caused == 0) continue;
      const size_t lpos = find_.by_start(c.last.rank, c.last.step_start_ns);
      if (lpos == SIZE_MAX) continue;
      RankReport& lr = ranks_[c.last.rank];
      const StepResult ls = lr.steps[lpos];
      const Part why = cause_part(ls, med_.get(ls.index, cause_candidates(ls)));
      lr.cross.caused_ns += c.caused;
      t_.causes[c.last.rank][why] += c.caused;
      t_.all_causes[why] += c.caused;
    }
    closed_.clear();
  }

  struct Wait {
    uint32_t instance;  // in closed_
    Arrival a;          // the waiting rank's arrival
    int64_t until;      // its ns when the last rank arrived
  };
  struct Closed {
    Arrival last;
    int64_t caused = 0;  // the others' wait, where exposed
  };

  Report& rep_;
  std::vector<RankReport>& ranks_;
  const std::vector<RankClock>& clocks_;
  std::vector<size_t> next_;  // per rank: its next collective
  uint64_t round_ = 0;
  std::vector<std::vector<Wait>> waits_;  // per rank: waits to move
  std::vector<Closed> closed_;
  std::unordered_map<uint64_t, uint32_t> members_;  // comm → ranks in it
  std::unordered_map<Key, Open, KeyHash> open_;
  std::vector<Key> keys_;
  RankStepCursor find_;
  StepMedians med_;
  Tally t_;
};

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
    if (st.name() == stage && st.measured) return st.capacity;
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
  const int64_t spread = median_ns(t.others_spread.values());
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankCross& c = ranks[r].cross;
    c.p_value = binomial_tail(c.instances, c.times_last, 1.0 / n_ranks);
    const int64_t margin = median_ns(t.margins[r].values());
    c.median_margin_ms = static_cast<double>(margin) / 1e6;
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

RankComms rank_comms(const std::vector<RankReport>& ranks) {
  RankComms out(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto& v = out[r];
    const auto& cs = ranks[r].collectives;
    for (size_t i = 0; i < cs.size(); ++i) {  // few communicators: a short list
      const uint64_t comm = cs.peek(i).comm_id;
      if (std::find(v.begin(), v.end(), comm) == v.end()) v.push_back(comm);
    }
    std::sort(v.begin(), v.end());
  }
  return out;
}

void attribute_stragglers(Report& rep, const std::vector<RankClock>& clocks,
                          const CrossRankOptions& opt, const RankComms* comms) {
  const Tally t = Walk(rep, clocks, comms != nullptr ? *comms : rank_comms(rep.ranks)).run();
  rep.cross.straggler_wait_ns = t.moved;
  rep.cross.arrival_skew_p50_ms = pct_ms(t.spreads.values(), 0.5);
  rep.cross.arrival_skew_p90_ms = pct_ms(t.spreads.values(), 0.9);
  name_stragglers(rep, t, opt);
  const auto common = ranked_causes(t.all_causes);
  if (rep.cross.stragglers.empty() && !common.empty())
    rep.cross.common_cause = "all ranks wait mostly for the last rank's " + common.front().first;
}

}  // namespace stallscope::analyzer::multirank
