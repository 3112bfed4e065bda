// stallscope analyzer — the scaling study: runs of one workload at different
// rank counts (docs/scaling.md). Each rank is assumed to process the same
// work per step (weak scaling), so
//   throughput(N) = N ÷ step(N)          (rank-steps per second)
//   efficiency(N) = throughput(N) ÷ (N × throughput(1)) = step(1) ÷ step(N)
//   1 − efficiency(N) = Σ_g (part_g(N) − part_g(1)) ÷ step(N)
// where step and part_g are means over ranks and steady steps, and the
// groups g are exposed transfer, straggler wait, data stalls, host overhead,
// compute inflation and copies; the terms sum to the lost efficiency exactly.
//
//   std::vector<Report> runs = {r1, r2, r4};
//   ScalingStudy s = scaling_study(runs);
//   write_scaling_text(std::cout, s);
#pragma once

#include <array>
#include <iosfwd>
#include <string>
#include <vector>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

enum class LossTerm : uint8_t { kTransfer, kStraggler, kData, kHost, kCompute, kCopies, kCount };
inline constexpr size_t kLossTerms = static_cast<size_t>(LossTerm::kCount);
std::string_view loss_key(LossTerm t) noexcept;  // "exposed_transfer", "straggler_wait", …

struct ScalingPoint {
  std::string input;
  size_t ranks = 0;
  double step_ms = 0;                        // mean steady step over ranks
  double throughput = 0;                     // rank-steps per second
  double efficiency = 0;                     // vs the smallest run, scaled to one rank
  std::array<double, kLossTerms> part_ms{};  // mean ms per step of each group
  std::array<double, kLossTerms> lost{};     // share of efficiency lost to each group
  std::string straggler;                     // the cross-rank summary line
};

struct ScalingStudy {
  std::vector<ScalingPoint> points;  // by rank count
  size_t base_ranks = 0;             // the reference run (1 when present)
  std::vector<std::string> warnings;
};

// One point per report (reports with no steady step are skipped with a
// warning). The reference is the run with the fewest ranks; with N0 > 1 ranks
// efficiency is throughput(N) ÷ (N/N0 × throughput(N0)).
ScalingStudy scaling_study(const std::vector<Report>& runs, const std::vector<std::string>& inputs);

void write_scaling_text(std::ostream& o, const ScalingStudy& s);
void write_scaling_json(std::ostream& o, const ScalingStudy& s);
// One HTML page: efficiency against ranks and the lost efficiency stacked by term.
void write_scaling_html(std::ostream& o, const ScalingStudy& s);

}  // namespace stallscope::analyzer
