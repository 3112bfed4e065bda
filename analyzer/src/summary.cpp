#include "summary.hpp"

#include <algorithm>
#include <cmath>

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

size_t warmup_count(const std::vector<StepResult>& steps, size_t max_steps) {
  if (steps.size() < 4) return 0;
  std::vector<int64_t> walls;
  for (const auto& s : steps) walls.push_back(s.wall());
  const double median = percentile_ms(walls, 0.5) * 1e6;
  const size_t cap = std::min(max_steps, steps.size() / 4);
  size_t n = 1;
  while (n < cap && static_cast<double>(steps[n].wall()) > 1.5 * median) ++n;
  return std::max<size_t>(1, std::min(n, cap));
}

void summarize_steps(RankReport& r, const AnalyzeOptions& opt) {
  r.warmup_steps = warmup_count(r.steps, opt.warmup_max);
  for (size_t i = 0; i < r.steps.size(); ++i) r.steps[i].warmup = i < r.warmup_steps;
  std::vector<int64_t> walls;
  std::array<std::vector<int64_t>, kPartCount> parts;
  int64_t total = 0;
  for (const auto& s : r.steps) {
    if (s.warmup) continue;
    walls.push_back(s.wall());
    total += s.wall();
    for (size_t p = 0; p < kPartCount; ++p) {
      parts[p].push_back(s.parts[p]);
      r.parts[p].total_ns += s.parts[p];
    }
  }
  r.steady_steps = walls.size();
  p50_p90_ms(walls, r.step_p50_ms, r.step_p90_ms);
  for (size_t p = 0; p < kPartCount; ++p) {
    r.parts[p].share = total > 0 ? static_cast<double>(r.parts[p].total_ns) / static_cast<double>(total) : 0;
    p50_p90_ms(parts[p], r.parts[p].p50_ms, r.parts[p].p90_ms);
  }
  // Outliers: steady steps at least outlier_factor × the median, longest first.
  std::vector<size_t> out;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const auto& s = r.steps[i];
    if (!s.warmup && r.steady_steps >= 4 &&
        static_cast<double>(s.wall()) >= opt.outlier_factor * r.step_p50_ms * 1e6)
      out.push_back(i);
  }
  std::sort(out.begin(), out.end(),
            [&](size_t a, size_t b) { return r.steps[a].wall() > r.steps[b].wall(); });
  if (out.size() > opt.max_outliers) out.resize(opt.max_outliers);
  for (size_t i : out) r.steps[i].outlier = true;
}

}  // namespace stallscope::analyzer
