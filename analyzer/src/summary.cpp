#include "summary.hpp"

#include <algorithm>
#include <cmath>

#include "decimated.hpp"

namespace stallscope::analyzer {

double percentile_ms(std::vector<int64_t> ns, double q) {
  if (ns.empty()) return 0;
  const size_t k = static_cast<size_t>(std::llround(q * static_cast<double>(ns.size() - 1)));
  std::nth_element(ns.begin(), ns.begin() + static_cast<long>(k), ns.end());
  return static_cast<double>(ns[k]) / 1e6;
}

void p50_p90_ms(std::vector<int64_t>& ns, double& p50, double& p90) {
  p50 = p90 = 0;
  if (ns.empty()) return;
  const auto [lo, hi] = std::minmax_element(ns.begin(), ns.end());
  if (*lo == *hi) {  // a part that is the same in every step (often none at all)
    p50 = p90 = static_cast<double>(*lo) / 1e6;
    return;
  }
  const double last = static_cast<double>(ns.size() - 1);
  const auto k50 = static_cast<size_t>(std::llround(0.5 * last));
  const auto k90 = static_cast<size_t>(std::llround(0.9 * last));
  std::nth_element(ns.begin(), ns.begin() + static_cast<long>(k50), ns.end());
  p50 = static_cast<double>(ns[k50]) / 1e6;
  // Everything after k50 is at least ns[k50]: the 90th is among them.
  std::nth_element(ns.begin() + static_cast<long>(k50), ns.begin() + static_cast<long>(k90),
                   ns.end());
  p90 = static_cast<double>(ns[k90]) / 1e6;
}

size_t warmup_count(const SpillVector<StepResult>& steps, size_t max_steps,
                    Decimated<int64_t>& walls) {
  if (steps.size() < 4) return 0;
  const double median = percentile_ms(std::move(walls.values()), 0.5) * 1e6;
  const size_t cap = std::min(max_steps, steps.size() / 4);
  size_t n = 1;
  while (n < cap && static_cast<double>(steps.peek(n).wall()) > 1.5 * median) ++n;
  return std::max<size_t>(1, std::min(n, cap));
}

void summarize_steps(RankReport& r, const AnalyzeOptions& opt, Decimated<int64_t>& step_walls,
                     size_t min_warmup) {
  r.warmup_steps = std::max(warmup_count(r.steps, opt.warmup_max, step_walls),
                            std::min(min_warmup, r.steps.size()));
  for (size_t i = 0; i < r.warmup_steps; ++i) r.steps.edit(i).warmup = true;
  // One pass over the steady steps; the percentiles come from bounded
  // samples (exact up to kSampleCap steps).
  Decimated<int64_t> walls(kSampleCap);
  std::vector<Decimated<int64_t>> parts(kPartCount, Decimated<int64_t>(kSampleCap));
  // The longest steady steps, max_outliers of them, found in the same pass
  // (a heap: the shortest on top); the outliers are among them.
  auto longer = [](const std::pair<int64_t, size_t>& a, const std::pair<int64_t, size_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::vector<std::pair<int64_t, size_t>> longest;  // (wall, position)
  int64_t total = 0;
  for (size_t i = r.warmup_steps; i < r.steps.size(); ++i) {
    const StepResult& s = r.steps.peek(i);
    walls.add(s.wall());
    total += s.wall();
    for (size_t p = 0; p < kPartCount; ++p) {
      parts[p].add(s.parts[p]);
      r.parts[p].total_ns += s.parts[p];
    }
    if (opt.max_outliers == 0) continue;
    longest.emplace_back(s.wall(), i);
    std::push_heap(longest.begin(), longest.end(), longer);
    if (longest.size() > opt.max_outliers) {
      std::pop_heap(longest.begin(), longest.end(), longer);
      longest.pop_back();
    }
  }
  r.steady_steps = walls.seen();
  p50_p90_ms(walls.values(), r.step_p50_ms, r.step_p90_ms);
  for (size_t p = 0; p < kPartCount; ++p) {
    r.parts[p].share = total > 0 ? static_cast<double>(r.parts[p].total_ns) / static_cast<double>(total) : 0;
    p50_p90_ms(parts[p].values(), r.parts[p].p50_ms, r.parts[p].p90_ms);
  }
  // Outliers: steady steps at least outlier_factor × the median.
  if (r.steady_steps < 4) return;
  for (const auto& [w, i] : longest)
    if (static_cast<double>(w) >= opt.outlier_factor * r.step_p50_ms * 1e6) r.steps.edit(i).outlier = true;
}

}  // namespace stallscope::analyzer
