// The cross-rank section of the HTML report: summary, per-rank table,
// stragglers, and two heatmaps — step time against the median step, and the
// largest part. Rows are ranks (ordered by node) or, with many ranks, nodes;
// columns are buckets of steps (median and max per bucket, never sampled).
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "cross_render.hpp"

namespace stallscope::analyzer {

namespace {

// At most this many step buckets (columns) and rows of ranks per heatmap:
// 256 ranks × 1,000 steps stays well under 500 KB.
constexpr size_t kMaxCols = 40, kMaxRows = 32;
constexpr int kW = 960;

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

// White (at or under the median step) to dark red (twice the median or more).
std::string heat(double ratio) {
  const double v = std::clamp(ratio - 1.0, 0.0, 1.0);
  char b[16];
  // Light grey (a bucket at the run's median step or faster) to dark red (twice it).
  std::snprintf(b, sizeof b, "#%02x%02x%02x", 236 - int(v * 53), 239 - int(v * 211), 241 - int(v * 213));
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

// One heatmap row: ranks in their order (one rank, one node or a few nodes)
// and its label.
struct Row {
  std::vector<size_t> ranks;  // indices into r.ranks
  std::string label;
};

// One row per rank when they are few (ordered by node), else one per node,
// and consecutive nodes share a row when there are more than kMaxRows.
std::vector<Row> heat_rows(const Report& r) {
  std::vector<std::string> hosts;  // in order of first appearance
  std::vector<std::vector<size_t>> by_host;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    auto it = std::find(hosts.begin(), hosts.end(), r.ranks[i].host);
    if (it == hosts.end()) {
      hosts.push_back(r.ranks[i].host);
      by_host.emplace_back();
      it = hosts.end() - 1;
    }
    by_host[size_t(it - hosts.begin())].push_back(i);
  }
  std::vector<Row> rows;
  if (r.ranks.size() <= kMaxRows) {
    for (const auto& h : by_host)
      for (size_t i : h) rows.push_back({{i}, std::string(1, 'r').append(std::to_string(r.ranks[i].rank))});
    return rows;
  }
  const size_t per = (hosts.size() + kMaxRows - 1) / kMaxRows;
  for (size_t h = 0; h < hosts.size(); h += per) {
    Row row;
    const size_t last = std::min(hosts.size(), h + per) - 1;
    for (size_t k = h; k <= last; ++k)
      row.ranks.insert(row.ranks.end(), by_host[k].begin(), by_host[k].end());
    row.label = hosts[h].substr(0, 10);
    if (last > h) row.label.append(1, '+').append(std::to_string(last - h));
    rows.push_back(std::move(row));
  }
  return rows;
}

// The steps of a row's ranks in bucket [from, to) of step positions:
// median and max step time (steady steps, or all when none is steady) and
// the part with the largest total.
struct Cell {
  double median_ns = 0, max_ns = 0;
  size_t top = 0;
  bool empty = true;
};

Cell cell_of(const Report& r, const Row& row, size_t from, size_t to) {
  std::vector<int64_t> steady, all;
  PartNs sum{};
  for (size_t i : row.ranks) {
    const auto& steps = r.ranks[i].steps;
    for (size_t si = from; si < std::min(to, steps.size()); ++si) {
      const StepResult s = steps[si];
      all.push_back(s.wall());
      if (!s.warmup) steady.push_back(s.wall());
      for (size_t p = 0; p < kPartCount; ++p) sum[p] += s.parts[p];
    }
  }
  Cell c;
  auto& v = steady.empty() ? all : steady;
  if (v.empty()) return c;
  c.empty = false;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  c.median_ns = double(v[v.size() / 2]);
  c.max_ns = double(*std::max_element(all.begin(), all.end()));
  for (size_t p = 1; p < kPartCount; ++p)
    if (sum[p] > sum[c.top]) c.top = p;
  return c;
}

// Rows of ranks (see heat_rows) by columns of step buckets, each cell one
// bucket: its median step time (colour) and max (a dark strip on top where
// it is over 1.5× the run's median step), or its largest part.
void heatmap(std::ostream& o, const Report& r, bool by_part, const char* const* colors) {
  size_t max_steps = 0;
  for (const auto& rk : r.ranks) max_steps = std::max(max_steps, rk.steps.size());
  if (max_steps == 0) return;
  const std::vector<Row> rows = heat_rows(r);
  const size_t per = (max_steps + kMaxCols - 1) / kMaxCols;
  const size_t cols = (max_steps + per - 1) / per;
  const double cw = double(kW - 80) / double(cols);
  const int rh = std::max(6, std::min(14, int(480 / rows.size())));
  const double med = median_step_ns(r);
  o << "<svg class=heat width=" << kW << " height=" << rh * int(rows.size()) + 4
    << " role=img><title>" << (by_part ? "largest part" : "step time") << " per "
    << (rows.size() == r.ranks.size() ? "rank" : "node") << " and bucket of " << per
    << (per == 1 ? " step" : " steps") << "</title>\n";
  for (size_t y = 0; y < rows.size(); ++y) {
    const Row& row = rows[y];
    o << "<text x=0 y=" << int(y) * rh + rh - 1 << " font-size=" << std::min(rh, 11) << ">"
      << esc(row.label) << "</text>";
    for (size_t x = 0; x < cols; ++x) {
      const Cell c = cell_of(r, row, x * per, (x + 1) * per);
      if (c.empty) continue;
      const std::string cx = fmt("%.1f", 80 + double(x) * cw);
      o << "<rect x=" << cx << " y=" << int(y) * rh << " width=" << fmt("%.1f", cw)
        << " height=" << rh << " fill='"
        << (by_part ? std::string(colors[c.top]) : heat(c.median_ns / med)) << "'><title>"
        << esc(row.label) << " steps " << x * per << "-" << std::min(max_steps, (x + 1) * per) - 1;
      if (by_part)
        o << ": " << esc(std::string(part_label(Part(c.top))));
      else
        o << fmt(": median %.2f", c.median_ns / 1e6) << fmt(" max %.2f ms", c.max_ns / 1e6);
      o << "</title></rect>";
      if (!by_part && c.max_ns > 1.5 * med)
        o << "<rect class=outlier x=" << cx << " y=" << int(y) * rh << " width=" << fmt("%.1f", cw)
          << " height=2 fill='" << heat(c.max_ns / med) << "'/>";
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
  o << "<h3>step time per " << (c.ranks <= kMaxRows ? "rank" : "node")
    << " and step bucket: the bucket's median (light grey: the run's median step or less, dark "
       "red: twice it); a dark strip on top: its max is over 1.5× the median</h3>\n";
  heatmap(o, r, false, part_colors);
  o << "<h3>largest part per " << (c.ranks <= kMaxRows ? "rank" : "node")
    << " and step bucket</h3>\n";
  heatmap(o, r, true, part_colors);
  table(o, r);
  o << "</section>\n";
}

}  // namespace stallscope::analyzer
