// Headspace (`stallscope run --headspace`): the step with data for free,
// given beside an ordinary run's report (`report --headspace`, `tune`).
#include <algorithm>
#include <string_view>

#include "stallscope/analyzer/analyzer.hpp"

namespace stallscope::analyzer {

double data_stall_ms(const RankReport& r) {
  double share = 0;
  for (size_t p = 0; p < kPartCount; ++p)
    if (is_data(Part(p))) share += r.parts[p].share;
  return share * r.step_p50_ms;
}

void apply_headspace(Report& rep, const Report& headspace, const std::string& from) {
  for (RankReport& r : rep.ranks) {
    // The same rank of the headspace run, else its first.
    const RankReport* h = nullptr;
    for (const RankReport& x : headspace.ranks)
      if (x.rank == r.rank) h = &x;
    if (h == nullptr && !headspace.ranks.empty()) h = &headspace.ranks.front();
    if (h == nullptr || h->steady_steps == 0 || h->step_p50_ms <= 0) continue;
    r.headspace.ceiling_ms = h->step_p50_ms;
    r.headspace.ceiling_from = from;
    // Beyond 5 % of the step: within it, run-to-run noise.
    const double cost = (r.step_p50_ms - data_stall_ms(r)) - h->step_p50_ms;
    r.headspace.loader_cost_ms = cost > 0.05 * r.step_p50_ms ? cost : 0;
  }
}

}  // namespace stallscope::analyzer
