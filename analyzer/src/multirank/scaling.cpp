// The scaling study (scaling.hpp, docs/scaling.md): per run the mean step and
// part groups over ranks and steady steps; efficiency against the smallest
// run; the lost efficiency split by the growth of each group.
#include "stallscope/analyzer/scaling.hpp"

#include <algorithm>

namespace stallscope::analyzer {

namespace {

LossTerm term_of(Part p) {
  switch (p) {
    case Part::kCommTransfer:
      return LossTerm::kTransfer;
    case Part::kStragglerWait:
      return LossTerm::kStraggler;
    case Part::kDataStorage:
    case Part::kDataPreprocess:
    case Part::kDataHandoff:
    case Part::kDataUnknown:
      return LossTerm::kData;
    case Part::kCompute:
      return LossTerm::kCompute;
    case Part::kCopyH2D:
    case Part::kCopyOther:
      return LossTerm::kCopies;
    default:
      return LossTerm::kHost;
  }
}

bool measure(const Report& r, ScalingPoint& pt) {
  int64_t wall = 0;
  size_t steps = 0;
  std::array<int64_t, kLossTerms> ns{};
  for (const auto& rk : r.ranks)
    for (const auto& s : rk.steps) {
      if (s.warmup) continue;
      ++steps;
      wall += s.wall();
      for (size_t p = 0; p < kPartCount; ++p)
        ns[static_cast<size_t>(term_of(Part(p)))] += s.parts[p];
    }
  if (steps == 0) return false;
  pt.ranks = r.ranks.size();
  pt.step_ms = double(wall) / 1e6 / double(steps);
  pt.throughput = pt.step_ms > 0 ? double(pt.ranks) * 1e3 / pt.step_ms : 0;
  for (size_t t = 0; t < kLossTerms; ++t) pt.part_ms[t] = double(ns[t]) / 1e6 / double(steps);
  pt.straggler = r.cross.present ? r.cross.summary : "";
  return true;
}

}  // namespace

std::string_view loss_key(LossTerm t) noexcept {
  static constexpr std::string_view kKeys[kLossTerms] = {"exposed_transfer",  "straggler_wait",
                                                         "data_stalls",       "host_overhead",
                                                         "compute_inflation", "copies"};
  return kKeys[static_cast<size_t>(t)];
}

ScalingStudy scaling_study(const std::vector<Report>& runs,
                           const std::vector<std::string>& inputs) {
  ScalingStudy s;
  for (size_t i = 0; i < runs.size(); ++i) {
    ScalingPoint pt;
    pt.input = i < inputs.size() ? inputs[i] : "";
    if (!measure(runs[i], pt)) {
      s.warnings.push_back(pt.input + ": no steady steps: left out of the study");
      continue;
    }
    s.points.push_back(pt);
  }
  std::stable_sort(s.points.begin(), s.points.end(),
                   [](const ScalingPoint& a, const ScalingPoint& b) { return a.ranks < b.ranks; });
  if (s.points.empty()) return s;
  const ScalingPoint base = s.points.front();
  s.base_ranks = base.ranks;
  if (base.ranks != 1)
    s.warnings.push_back("no one-rank run: efficiency is relative to the " +
                         std::to_string(base.ranks) + "-rank run");
  for (auto& pt : s.points) {
    pt.efficiency = pt.step_ms > 0 ? base.step_ms / pt.step_ms : 0;
    for (size_t t = 0; t < kLossTerms; ++t)
      pt.lost[t] = pt.step_ms > 0 ? (pt.part_ms[t] - base.part_ms[t]) / pt.step_ms : 0;
  }
  return s;
}

}  // namespace stallscope::analyzer
