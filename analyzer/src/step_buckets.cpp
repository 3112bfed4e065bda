// The steps chart's buckets and scale (render.hpp), shared by the HTML page
// and the JSON report so that every number the page draws is in the JSON.
#include <algorithm>
#include <vector>

#include "stallscope/analyzer/render.hpp"

namespace stallscope::analyzer {

std::vector<StepBucket> step_buckets(const RankReport& r, size_t max_buckets) {
  std::vector<StepBucket> out;
  const size_t n = r.steps.size();
  if (n == 0 || max_buckets == 0) return out;
  const size_t per = (n + max_buckets - 1) / max_buckets;
  out.reserve((n + per - 1) / per);
  std::vector<StepResult> group;
  group.reserve(per);
  for (size_t i = 0; i < n; i += per) {
    group.clear();
    for (size_t k = i; k < std::min(n, i + per); ++k) group.push_back(r.steps[k]);
    StepBucket b;
    b.first = group.front().index;
    b.last = group.back().index;
    b.steps = group.size();
    b.warmup = true;
    for (const StepResult& s : group) {
      b.warmup = b.warmup && s.warmup;
      b.outlier = b.outlier || s.outlier;
    }
    const auto longest = std::max_element(group.begin(), group.end(), [](const auto& a, const auto& c) {
      return a.wall() < c.wall();
    });
    b.max_index = longest->index;
    b.max_wall_ns = longest->wall();
    std::nth_element(group.begin(), group.begin() + long(group.size() / 2), group.end(),
                     [](const auto& a, const auto& c) { return a.wall() < c.wall(); });
    const StepResult& med = group[group.size() / 2];
    b.median_index = med.index;
    b.median_wall_ns = med.wall();
    b.median_parts = med.parts;
    out.push_back(b);
  }
  return out;
}

int64_t chart_scale_ns(const RankReport& r) {
  int64_t steady = 0, all = 0;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepResult& s = r.steps[i];
    all = std::max(all, s.wall());
    if (!s.warmup && !s.outlier) steady = std::max(steady, s.wall());
  }
  const int64_t top = steady > 0 ? steady + steady / 10 : all;
  return std::max<int64_t>(top, 1);
}

}  // namespace stallscope::analyzer
