// The cross-rank section of the terminal report: clock alignment, imbalance,
// stragglers (or the common cause) and a per-rank table.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <ostream>

#include "cross_render.hpp"

namespace stallscope::analyzer {

namespace {

constexpr size_t kMaxRows = kMaxRankScreens;

double mean_ms(const RankReport& r, std::initializer_list<Part> parts) {
  if (r.steady_steps == 0) return 0;
  int64_t ns = 0;
  for (Part p : parts) ns += r.parts[idx(p)].total_ns;
  return static_cast<double>(ns) / 1e6 / static_cast<double>(r.steady_steps);
}

void rank_row(std::ostream& o, const RankReport& r) {
  char line[256];
  std::snprintf(
      line, sizeof line,
      "%5lld %-12.12s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %5llu/%-5llu %s\n",
      static_cast<long long>(r.rank), r.host.c_str(), r.step_p50_ms, mean_ms(r, {Part::kCompute}),
      mean_ms(r, {Part::kStragglerWait}), mean_ms(r, {Part::kCommTransfer}),
      mean_ms(r, {Part::kCopyH2D, Part::kCopyOther}),
      mean_ms(r, {Part::kDataStorage, Part::kDataPreprocess, Part::kDataHandoff, Part::kDataUnknown}),
      mean_ms(r, {Part::kHostAfterSync, Part::kHostLaunch, Part::kHostCpu, Part::kHostBlocked}),
      static_cast<unsigned long long>(r.cross.times_last),
      static_cast<unsigned long long>(r.cross.instances), r.cross.top_cause.c_str());
  o << line;
}

}  // namespace

// Rows shown: every rank when few, else those that caused or suffered the most.
std::vector<size_t> shown_ranks(const Report& r) {
  std::vector<size_t> rows(r.ranks.size());
  std::iota(rows.begin(), rows.end(), 0);
  if (rows.size() <= kMaxRows) return rows;
  std::sort(rows.begin(), rows.end(), [&](size_t a, size_t b) {
    const auto& x = r.ranks[a].cross;
    const auto& y = r.ranks[b].cross;
    return x.caused_ns != y.caused_ns ? x.caused_ns > y.caused_ns
                                      : r.ranks[a].step_p50_ms > r.ranks[b].step_p50_ms;
  });
  rows.resize(kMaxRows);
  std::sort(rows.begin(), rows.end());
  return rows;
}

namespace {

void stragglers(std::ostream& o, const CrossRank& c) {
  for (const auto& s : c.stragglers) {
    char line[320];
    std::snprintf(line, sizeof line,
                  "straggler rank %lld (%s): last at %llu of %llu collectives (p = %.1e), by %.2f "
                  "ms (median); "
                  "others waited %s for it; its cause:",
                  static_cast<long long>(s.rank), s.host.c_str(),
                  static_cast<unsigned long long>(s.times_last),
                  static_cast<unsigned long long>(s.instances), s.p_value, s.median_margin_ms,
                  total_wait_text(s.caused_ns).c_str());
    o << line;
    for (size_t i = 0; i < s.causes.size() && i < 3; ++i) {
      std::snprintf(line, sizeof line, " %s %.0f %%", s.causes[i].first.c_str(),
                    s.caused_ns > 0 ? 100.0 * static_cast<double>(s.causes[i].second) /
                                          static_cast<double>(s.caused_ns)
                                    : 0);
      o << (i > 0 ? "," : "") << line;
    }
    o << "\n";
  }
}

}  // namespace

void write_cross_text(std::ostream& o, const Report& r, bool color) {
  const CrossRank& c = r.cross;
  if (!c.present) return;
  const char* bold = color ? "\033[1m" : "";
  const char* off = color ? "\033[0m" : "";
  o << bold << "stallscope cross-rank report" << off << " — " << c.ranks << " ranks on "
    << c.clock.hosts << " host(s)\n"
    << bold << c.summary << off << "\n";
  o << "clocks: " << c.clock.note << "\n";
  char line[256];
  std::snprintf(
      line, sizeof line,
      "imbalance: median step max/median over ranks %.2f; arrival skew p50 %.2f ms, p90 %.2f ms "
      "over %llu collectives; straggler wait %s in all\n",
      c.step_max_over_median, c.arrival_skew_p50_ms, c.arrival_skew_p90_ms,
      static_cast<unsigned long long>(c.instances), total_wait_text(c.straggler_wait_ns).c_str());
  o << line;
  stragglers(o, c);
  if (!c.common_cause.empty()) o << c.common_cause << "\n";
  o << bold
    << " rank host          step p50  compute straggler transfer   copies     data     host   "
       "last/colls top part"
    << off << "\n";
  for (size_t i : shown_ranks(r)) rank_row(o, r.ranks[i]);
  if (r.ranks.size() > kMaxRows)
    o << "(" << r.ranks.size() - kMaxRows
      << " more ranks in the JSON report; parts: mean ms per steady step)\n";
  else
    o << "(parts: mean ms per steady step)\n";
  o << "\n";
}

}  // namespace stallscope::analyzer
