// The cross-rank section of the HTML report: summary, per-rank table,
// stragglers, and two rank × step heatmaps — step time against the median
// step, and each step's largest part. Large runs are sampled (every k-th
// rank and step) so the page stays a few MB.
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "cross_render.hpp"

namespace stallscope::analyzer {

namespace {

constexpr int kMaxCols = 240, kMaxRows = 128, kW = 960;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

size_t top_part(const StepResult& s) {
  size_t best = 0;
  for (size_t p = 1; p < kPartCount; ++p)
    if (s.parts[p] > s.parts[best]) best = p;
  return best;
}

// White (at or under the median step) to dark red (twice the median or more).
std::string heat(double ratio) {
  const double v = std::clamp(ratio - 1.0, 0.0, 1.0);
  char b[16];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", 255 - int(v * 72), 255 - int(v * 230),
                255 - int(v * 230));
  return b;
}

double median_step_ns(const Report& r) {
  std::vector<int64_t> v;
  for (const auto& rk : r.ranks)
    for (const auto& s : rk.steps)
      if (!s.warmup) v.push_back(s.wall());
  if (v.empty()) return 1;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return std::max<double>(1, double(v[v.size() / 2]));
}

void heatmap(std::ostream& o, const Report& r, bool by_part, const char* const* colors) {
  size_t max_steps = 0;
  for (const auto& rk : r.ranks) max_steps = std::max(max_steps, rk.steps.size());
  if (max_steps == 0) return;
  const size_t col_every = (max_steps + kMaxCols - 1) / kMaxCols;
  const size_t row_every = (r.ranks.size() + kMaxRows - 1) / kMaxRows;
  const size_t cols = (max_steps + col_every - 1) / col_every,
               rows = (r.ranks.size() + row_every - 1) / row_every;
  const double cw = double(kW - 60) / double(cols);
  const int rh = std::max(3, std::min(14, int(600 / rows)));
  const double med = median_step_ns(r);
  o << "<svg width=" << kW << " height=" << rh * int(rows) + 4 << " role=img><title>"
    << (by_part ? "largest part" : "step time") << " per rank and step</title>\n";
  for (size_t ri = 0, y = 0; ri < r.ranks.size(); ri += row_every, ++y) {
    const RankReport& rk = r.ranks[ri];
    o << "<text x=0 y=" << int(y) * rh + rh - 1 << " font-size=" << std::min(rh, 11) << ">r"
      << rk.rank << "</text>";
    for (size_t si = 0, x = 0; si < rk.steps.size(); si += col_every, ++x) {
      const StepResult& s = rk.steps[si];
      const size_t p = top_part(s);
      o << "<rect x=" << fmt("%.1f", 60 + double(x) * cw) << " y=" << int(y) * rh
        << " width=" << fmt("%.2f", cw) << " height=" << rh << " fill='"
        << (by_part ? std::string(colors[p]) : heat(double(s.wall()) / med)) << "'><title>rank "
        << rk.rank << " step " << s.index << fmt(": %.2f ms, ", double(s.wall()) / 1e6)
        << esc(std::string(part_label(Part(p)))) << "</title></rect>";
    }
    o << "\n";
  }
  o << "</svg>\n";
}

void table(std::ostream& o, const Report& r) {
  o << "<table><tr><th>rank</th><th>host</th><th>step p50 ms</th><th>straggler wait "
       "ms</th><th>last / collectives</th>"
       "<th>caused ms</th><th>top part</th></tr>\n";
  for (const auto& rk : r.ranks) {
    o << "<tr><td>" << rk.rank << "</td><td>" << esc(rk.host) << "</td><td>"
      << fmt("%.2f", rk.step_p50_ms) << "</td><td>" << fmt("%.1f", double(rk.cross.waited_ns) / 1e6)
      << "</td><td>" << rk.cross.times_last << " / " << rk.cross.instances << "</td><td>"
      << fmt("%.1f", double(rk.cross.caused_ns) / 1e6) << "</td><td>" << esc(rk.cross.top_cause)
      << "</td></tr>\n";
  }
  o << "</table>\n";
}

}  // namespace

void write_cross_html(std::ostream& o, const Report& r, const char* const* part_colors) {
  const CrossRank& c = r.cross;
  if (!c.present) return;
  o << "<section><h2>across " << c.ranks << " ranks</h2><p class=summary>" << esc(c.summary)
    << "</p>\n<p>clocks: " << esc(c.clock.note) << "<br>imbalance: median step max/median "
    << fmt("%.2f", c.step_max_over_median) << "; arrival skew p50 "
    << fmt("%.2f ms", c.arrival_skew_p50_ms) << ", p90 " << fmt("%.2f ms", c.arrival_skew_p90_ms)
    << "; straggler wait " << total_wait_text(c.straggler_wait_ns) << " in all</p>\n";
  for (const auto& s : c.stragglers)
    o << "<p>straggler rank " << s.rank << " (" << esc(s.host) << "): last at " << s.times_last
      << " of " << s.instances << " collectives, by " << fmt("%.2f ms", s.median_margin_ms)
      << "; others waited " << total_wait_text(s.caused_ns)
      << "; its cause: " << esc(s.cause) << "</p>\n";
  if (!c.common_cause.empty()) o << "<p>" << esc(c.common_cause) << "</p>\n";
  o << "<h3>step time per rank and step (white: median step or less, dark red: twice the "
       "median)</h3>\n";
  heatmap(o, r, false, part_colors);
  o << "<h3>largest part per rank and step</h3>\n";
  heatmap(o, r, true, part_colors);
  table(o, r);
  o << "</section>\n";
}

}  // namespace stallscope::analyzer
