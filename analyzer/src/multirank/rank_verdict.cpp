// A rank's verdict after straggler wait moved out of its comm transfer: the
// cause named in its summary and the remedy that depends on exposed transfer
// (overlap_comm) are brought up to date, and a rank that mostly waits for
// others says for whom.
#include <algorithm>
#include <cstdio>

#include "../remedy.hpp"
#include "multirank_internal.hpp"

namespace stallscope::analyzer::multirank {

namespace {

// The summary rule of capacity.cpp: the largest part other than compute
// names the cause, unless compute dominates or nothing else reaches 5 %.
std::string cause_of(const RankReport& r, const std::string& waits_for) {
  if (r.steady_steps == 0) return r.cause;
  if (r.parts[idx(Part::kCompute)].share >= 0.9) return "compute-bound (healthy)";
  size_t best = idx(Part::kStragglerWait);
  for (size_t p = 1; p < kPartCount; ++p)
    if (r.parts[p].share > r.parts[best].share) best = p;
  if (r.parts[best].share < 0.05) return "compute-bound";
  const Part bp = static_cast<Part>(best);
  const std::string group(part_group(bp));
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: %s %.0f %% of step time",
                group == "data stall" ? "input-bound" : (group + "-bound").c_str(),
                std::string(part_label(bp)).c_str(), 100 * r.parts[best].share);
  std::string c = buf;
  if (bp == Part::kStragglerWait && !waits_for.empty()) c += " (" + waits_for + ")";
  return c;
}

void refresh_overlap_comm(RankReport& r) {
  const RunStats stats{};
  const Probes probes{};
  const RemedyContext ctx{r, stats, probes, mean_step_ms(r)};
  const auto fresh = overlap_comm_rule().evaluate(ctx);
  auto it = std::find_if(r.remedies.begin(), r.remedies.end(),
                         [](const Remedy& m) { return m.kind == RemedyId::kOverlapComm; });
  if (it == r.remedies.end()) return;  // never proposed: less transfer cannot make it apply
  if (fresh)
    *it = *fresh;
  else
    r.remedies.erase(it);
}

// collectives_below_link keeps its bandwidths; only the exposed transfer
// it would shorten changed.
void refresh_below_link(RankReport& r) {
  auto it = std::find_if(r.remedies.begin(), r.remedies.end(),
                         [](const Remedy& m) { return m.kind == RemedyId::kCollectivesBelowLink; });
  if (it == r.remedies.end()) return;
  const double step = mean_step_ms(r), transfer = mean_part_ms(r, Part::kCommTransfer);
  double bw = 0, link = 0;
  for (auto& n : it->inputs) {
    if (n.name == "bus_bandwidth_p90") bw = n.value;
    if (n.name == "link_bandwidth") link = n.value;
    if (n.name == "exposed_transfer_ms") n.value = transfer;
  }
  if (transfer < 0.1 * step || link <= 0) {
    r.remedies.erase(it);
    return;
  }
  it->step_ms = step;
  it->predicted_step_ms = below_link_predicted_ms(step, transfer, bw, link);
}

}  // namespace

void refresh_verdict(RankReport& r, const CrossRank& c) {
  if (r.cross.waited_ns == 0) return;
  std::string waits_for;
  if (!c.stragglers.empty())
    waits_for = "waiting for rank " + std::to_string(c.stragglers.front().rank) + ": its " +
                c.stragglers.front().cause;
  else if (!c.common_cause.empty())
    waits_for = c.common_cause;
  const std::string old = r.cause;
  r.cause = cause_of(r, waits_for);
  if (r.summary.rfind(old, 0) == 0) r.summary = r.cause + r.summary.substr(old.size());
  refresh_overlap_comm(r);
  refresh_below_link(r);
  order_remedies(r.remedies);  // gains changed
}

}  // namespace stallscope::analyzer::multirank
