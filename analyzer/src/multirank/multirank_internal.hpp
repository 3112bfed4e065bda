// Internals of the cross-rank pass (multirank.hpp): clock alignment and
// straggler attribution, each testable on its own.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "../decimated.hpp"
#include "stallscope/analyzer/multirank.hpp"

namespace stallscope::analyzer::multirank {

// A rank's monotonic ns → the common time base: t + base, corrected by the
// host's fitted offset a and drift b around t0 (both on the base-shifted time).
struct RankClock {
  int64_t base = 0;
  double a = 0, b = 0;
  int64_t t0 = 0;
  int64_t to_common(int64_t t) const noexcept {
    const int64_t x = t + base;
    return x + static_cast<int64_t>(std::llround(a + b * static_cast<double>(x - t0)));
  }
};

// A robust line d ≈ a + b (t − t0) through (t, d) points: offset only when
// the span is short, else the line through the medians of the two halves.
struct LineFit {
  double a = 0, b = 0;
  int64_t t0 = 0;
  double residual_ns = 0;  // median |d − fit|
};
LineFit fit_offset(std::vector<std::pair<int64_t, int64_t>> pts, const CrossRankOptions& opt);

using analyzer::Decimated;

// The communicators each rank took part in (small sorted sets, from one pass
// over its collectives).
using RankComms = std::vector<std::vector<uint64_t>>;
RankComms rank_comms(const std::vector<RankReport>& ranks);

// One clock per rank of r.ranks (same order) and what the alignment did.
// `comms`: rank_comms(ranks), when already at hand.
ClockAlignment align_clocks(const std::vector<RankReport>& ranks, const CrossRankOptions& opt,
                            std::vector<RankClock>* clocks, const RankComms* comms = nullptr);

// Straggler wait per step of every rank, the stragglers and the common cause.
void attribute_stragglers(Report& r, const std::vector<RankClock>& clocks,
                          const CrossRankOptions& opt, const RankComms* comms = nullptr);

// Brings a rank's cause, summary and overlap_comm remedy up to date after
// its straggler wait moved (a no-op for a rank that never waited).
void refresh_verdict(RankReport& r, const CrossRank& c);

// P(X ≥ k) for X ~ Binomial(n, p).
double binomial_tail(uint64_t n, uint64_t k, double p);

// The words for the cause a part stands for ("storage", "compute", "host", …).
std::string cause_word(Part p);

}  // namespace stallscope::analyzer::multirank
