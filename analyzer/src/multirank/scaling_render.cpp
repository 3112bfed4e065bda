// The scaling study printed: a terminal table, JSON (schema
// "stallscope.scaling", docs/scaling.md) and one HTML page with the
// efficiency curve and the lost efficiency stacked by term.
#include <algorithm>
#include <cstdio>
#include <ostream>

#include <nlohmann/json.hpp>

#include "stallscope/analyzer/scaling.hpp"

namespace stallscope::analyzer {

namespace {

constexpr const char* kTermColors[kLossTerms] = {"#ab47bc", "#6a1b9a", "#e65100",
                                                 "#c62828", "#2e7d32", "#1565c0"};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The term that lost the most efficiency at the largest run.
std::string largest_term(const ScalingPoint& p) {
  size_t best = 0;
  for (size_t t = 1; t < kLossTerms; ++t)
    if (p.lost[t] > p.lost[best]) best = t;
  return std::string(loss_key(LossTerm(best)));
}

void efficiency_plot(std::ostream& o, const ScalingStudy& s) {
  const int w = 420, h = 260, pad = 40;
  const double max_n = double(s.points.back().ranks);
  auto x = [&](double n) {
    return pad + (w - 2 * pad) * (max_n > 1 ? (n - 1) / (max_n - 1) : 0.5);
  };
  auto y = [&](double e) { return h - pad - (h - 2 * pad) * std::clamp(e, 0.0, 1.2) / 1.2; };
  o << "<svg width=" << w << " height=" << h << " role=img><title>scaling efficiency</title>"
    << "<line x1=" << pad << " y1=" << y(0) << " x2=" << w - pad << " y2=" << y(0)
    << " stroke=black />"
    << "<line x1=" << pad << " y1=" << y(0) << " x2=" << pad << " y2=" << y(1.2)
    << " stroke=black />"
    << "<line x1=" << pad << " y1=" << fmt("%.1f", y(1)) << " x2=" << w - pad
    << " y2=" << fmt("%.1f", y(1))
    << " stroke='#999' stroke-dasharray=4 /><text x=2 y=" << fmt("%.1f", y(1) + 4)
    << " font-size=11>1.0</text>"
    << "<polyline fill=none stroke='#1565c0' stroke-width=2 points='";
  for (const auto& p : s.points)
    o << fmt("%.1f", x(double(p.ranks))) << "," << fmt("%.1f", y(p.efficiency)) << " ";
  o << "'/>";
  for (const auto& p : s.points)
    o << "<circle cx=" << fmt("%.1f", x(double(p.ranks))) << " cy=" << fmt("%.1f", y(p.efficiency))
      << " r=4 fill='#1565c0'><title>" << p.ranks << " ranks: efficiency "
      << fmt("%.3f", p.efficiency)
      << "</title></circle><text x=" << fmt("%.1f", x(double(p.ranks)) - 4) << " y=" << h - pad + 16
      << " font-size=11>" << p.ranks << "</text>";
  o << "<text x=" << w / 2 - 20 << " y=" << h - 4 << " font-size=12>ranks</text></svg>\n";
}

void lost_bars(std::ostream& o, const ScalingStudy& s) {
  const int w = 480, h = 260, pad = 40;
  const double bw = double(w - 2 * pad) / double(std::max<size_t>(1, s.points.size())) * 0.6;
  o << "<svg width=" << w << " height=" << h << " role=img><title>lost efficiency by term</title>";
  for (size_t i = 0; i < s.points.size(); ++i) {
    const ScalingPoint& p = s.points[i];
    const double x0 = pad + double(i) * double(w - 2 * pad) / double(s.points.size());
    double y0 = h - pad;
    for (size_t t = 0; t < kLossTerms; ++t) {
      if (p.lost[t] <= 0) continue;
      const double hh = p.lost[t] * (h - 2 * pad);
      y0 -= hh;
      o << "<rect x=" << fmt("%.1f", x0) << " y=" << fmt("%.1f", y0) << " width=" << fmt("%.1f", bw)
        << " height=" << fmt("%.1f", hh) << " fill='" << kTermColors[t] << "'><title>" << p.ranks
        << " ranks: " << loss_key(LossTerm(t)) << " " << fmt("%.3f", p.lost[t])
        << "</title></rect>";
    }
    o << "<text x=" << fmt("%.1f", x0) << " y=" << h - pad + 16 << " font-size=11>" << p.ranks
      << " ranks</text>";
  }
  o << "</svg><div>";
  for (size_t t = 0; t < kLossTerms; ++t)
    o << "<span style='margin-right:10px'><i "
         "style='display:inline-block;width:10px;height:10px;background:"
      << kTermColors[t] << "'></i> " << loss_key(LossTerm(t)) << "</span>";
  o << "</div>\n";
}

}  // namespace

void write_scaling_text(std::ostream& o, const ScalingStudy& s) {
  for (const auto& w : s.warnings) o << "warning: " << w << "\n";
  o << "ranks   step ms  thr/s  efficiency   lost to: transfer straggler   data   host compute "
       "copies\n";
  for (const auto& p : s.points) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "%5zu %9.2f %6.1f %10.3f %17.3f %9.3f %6.3f %6.3f %7.3f %6.3f\n", p.ranks,
                  p.step_ms, p.throughput, p.efficiency, p.lost[0], p.lost[1], p.lost[2], p.lost[3],
                  p.lost[4], p.lost[5]);
    o << line;
  }
  if (s.points.size() > 1)
    o << "largest loss at " << s.points.back().ranks << " ranks: " << largest_term(s.points.back())
      << " (efficiency = step(" << s.base_ranks
      << ")/step(N); the lost terms sum to 1 - efficiency)\n";
  for (const auto& p : s.points)
    if (!p.straggler.empty()) o << p.ranks << " ranks: " << p.straggler << "\n";
}

void write_scaling_json(std::ostream& o, const ScalingStudy& s) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : s.points) {
    nlohmann::json lost = nlohmann::json::object(), parts = nlohmann::json::object();
    for (size_t t = 0; t < kLossTerms; ++t) {
      lost[std::string(loss_key(LossTerm(t)))] = p.lost[t];
      parts[std::string(loss_key(LossTerm(t)))] = p.part_ms[t];
    }
    pts.push_back({{"input", p.input},
                   {"ranks", p.ranks},
                   {"step_ms", p.step_ms},
                   {"throughput_per_s", p.throughput},
                   {"efficiency", p.efficiency},
                   {"lost", lost},
                   {"part_ms", parts},
                   {"cross_rank", p.straggler}});
  }
  const nlohmann::json j = {{"schema", "stallscope.scaling"},
                            {"schema_version", 1},
                            {"base_ranks", s.base_ranks},
                            {"warnings", s.warnings},
                            {"points", pts}};
  o << j.dump(1) << "\n";
}

void write_scaling_html(std::ostream& o, const ScalingStudy& s) {
  o << "<!doctype html><html><head><meta charset=utf-8><title>stallscope scaling</title><style>"
       "body{font:14px sans-serif;margin:20px}table{border-collapse:collapse}td,th{border:1px "
       "solid #ccc;"
       "padding:3px 6px}</style></head><body><h1>scaling study</h1>\n";
  if (s.points.empty()) {
    o << "<p>no usable run</p></body></html>\n";
    return;
  }
  efficiency_plot(o, s);
  lost_bars(o, s);
  o << "<table><tr><th>ranks</th><th>step ms</th><th>throughput /s</th><th>efficiency</th>";
  for (size_t t = 0; t < kLossTerms; ++t) o << "<th>lost: " << loss_key(LossTerm(t)) << "</th>";
  o << "</tr>\n";
  for (const auto& p : s.points) {
    o << "<tr><td>" << p.ranks << "</td><td>" << fmt("%.2f", p.step_ms) << "</td><td>"
      << fmt("%.1f", p.throughput) << "</td><td>" << fmt("%.3f", p.efficiency) << "</td>";
    for (size_t t = 0; t < kLossTerms; ++t) o << "<td>" << fmt("%.3f", p.lost[t]) << "</td>";
    o << "</tr>\n";
  }
  o << "</table><p>efficiency(N) = throughput(N) / (N &times; throughput(1)); "
       "docs/scaling.md</p></body></html>\n";
}

}  // namespace stallscope::analyzer
