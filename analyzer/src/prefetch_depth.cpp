// How deep a prefetch queue absorbs the run's bursts of data stalls: the
// producers' deficit, in batches, carried from step to step (a Lindley
// recursion), its peak the batches the queue must hold beyond today's.
#include <algorithm>
#include <cmath>

#include "remedy.hpp"

namespace stallscope::analyzer {

std::optional<PrefetchPlan> prefetch_plan(const RemedyContext& c, double capacity_per_s,
                                          double producer_share) {
  if (capacity_per_s <= 0) return std::nullopt;
  PrefetchPlan p;
  p.capacity_per_s = capacity_per_s;
  const double per_batch_ms = 1000.0 / capacity_per_s;
  double deficit = 0;   // batches the producers are behind after a step
  int run = 0;          // consecutive stalled steps
  double run_ms = 0;
  size_t steady = 0;
  for (const StepResult& st : c.r.steps) {
    if (st.warmup) continue;  // outliers stay: they are bursts too
    ++steady;
    const double wall = double(st.wall()) / 1e6;
    const double stall = std::max(0.0, double(st.parts[idx(Part::kDataStorage)] +
                                              st.parts[idx(Part::kDataPreprocess)] +
                                              st.parts[idx(Part::kDataUnknown)]) / 1e6) *
                         std::clamp(producer_share, 0.0, 1.0);
    const double consume = std::max(0.0, wall - stall);
    // The trainer waited `stall` ms for producers that make a batch every
    // per_batch_ms: that many batches short. While it works `consume` ms
    // they make consume / per_batch_ms batches against the one it takes.
    const double shortfall = stall / per_batch_ms;
    p.peak_batches = std::max(p.peak_batches, deficit + shortfall);
    deficit = std::max(0.0, deficit + shortfall - (consume / per_batch_ms - 1));
    if (stall > 0.05 * c.step_ms) {
      ++p.stalled_steps;
      ++run;
      run_ms += stall;
      if (run_ms > p.burst_ms) p.burst_ms = run_ms, p.burst_steps = run;
    } else {
      run = 0, run_ms = 0;
    }
  }
  p.steady_steps = static_cast<int>(steady);
  if (steady == 0 || p.peak_batches <= 0) return std::nullopt;
  p.extra_batches = std::max(1, static_cast<int>(std::ceil(p.peak_batches - 1e-9)));
  p.capped = p.extra_batches > kMaxExtraPrefetch;
  p.extra_batches = std::min(p.extra_batches, kMaxExtraPrefetch);
  return p;
}

}  // namespace stallscope::analyzer
