// The scaling study printed: a terminal table, JSON (schema
// "stallscope.scaling", docs/scaling.md) and one HTML page with the
// efficiency curve and the lost efficiency stacked by term.
#include <algorithm>
#include <cstdio>
#include <ostream>

#include <nlohmann/json.hpp>

#include "../html_common.hpp"
#include "stallscope/analyzer/scaling.hpp"

namespace stallscope::analyzer {

namespace {

constexpr const char* kTermColors[kLossTerms] = {"#ab47bc", "#6a1b9a", "#e65100",
                                                 "#c62828", "#2e7d32", "#1565c0"};

constexpr const char* kKeptColor = "#26a69a";

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

// Per run, one bar reaching the ideal (1.0): the efficiency kept (blue) at
// the bottom, the efficiency each term lost stacked above it. A term that
// gained (negative) is named in the tooltip and not drawn.
void split_bars(std::ostream& o, const ScalingStudy& s) {
  const int w = 960, h = 280, pad = 44, label_w = 150;
  const double plot_w = w - pad - label_w;
  const double slot = plot_w / double(std::max<size_t>(1, s.points.size()));
  const double bw = std::min(slot * 0.6, 90.0);
  double top = 1.0;
  for (const auto& p : s.points) {
    double sum = std::max(p.efficiency, 0.0);
    for (double l : p.lost) sum += std::max(l, 0.0);
    top = std::max(top, std::min(sum, 2.0));
  }
  const auto y = [&](double v) { return h - pad - (h - 2 * pad) * v / top; };
  o << "<svg class=scaling width=" << w << " height=" << h << " role=img><title>efficiency kept and lost, by term, "
    << "per rank count</title>\n";
  for (double t = 0; t <= top + 1e-9; t += 0.2)
    o << "<line x1=" << pad - 4 << " x2=" << w - label_w << " y1=" << fmt("%.1f", y(t)) << " y2=" << fmt("%.1f", y(t))
      << " class=grid /><text x=" << pad - 6 << " y=" << fmt("%.1f", y(t) + 4) << " text-anchor=end>"
      << fmt("%.1f", t) << "</text>";
  o << "<line x1=" << pad << " x2=" << w - label_w << " y1=" << fmt("%.1f", y(1)) << " y2=" << fmt("%.1f", y(1))
    << " class=ideal /><text x=" << w - label_w + 4 << " y=" << fmt("%.1f", y(1) + 4) << ">ideal (1.0)</text>\n";
  for (size_t i = 0; i < s.points.size(); ++i) {
    const ScalingPoint& p = s.points[i];
    const double x = pad + double(i) * slot + (slot - bw) / 2;
    std::string gained;
    for (size_t t = 0; t < kLossTerms; ++t)
      if (p.lost[t] < 0) gained += std::string(gained.empty() ? "; gained: " : ", ") +
                                   std::string(loss_key(LossTerm(t))) + fmt(" %.3f", -p.lost[t]);
    const double eff = std::clamp(p.efficiency, 0.0, top);
    o << "<g><title>" << p.ranks << " ranks: efficiency " << fmt("%.3f", p.efficiency);
    for (size_t t = 0; t < kLossTerms; ++t)
      if (p.lost[t] > 0) o << "&#10;lost to " << loss_key(LossTerm(t)) << " " << fmt("%.3f", p.lost[t]);
    o << gained << "</title><rect x=" << fmt("%.1f", x) << " y=" << fmt("%.1f", y(eff)) << " width=" << fmt("%.1f", bw)
      << " height=" << fmt("%.1f", y(0) - y(eff)) << " fill='" << kKeptColor << "'/>";
    double at = eff;
    for (size_t t = 0; t < kLossTerms; ++t) {
      const double l = std::min(std::max(p.lost[t], 0.0), top - at);
      if (l <= 0) continue;
      o << "<rect x=" << fmt("%.1f", x) << " y=" << fmt("%.1f", y(at + l)) << " width=" << fmt("%.1f", bw)
        << " height=" << fmt("%.1f", y(at) - y(at + l)) << " fill='" << kTermColors[t] << "'/>";
      at += l;
    }
    const bool inside = y(0) - y(eff) > 18;  // the value inside the bar, else above it
    o << "<text x=" << fmt("%.1f", x + bw / 2) << " y=" << fmt("%.1f", inside ? y(eff) + 14 : y(eff) - 4)
      << " text-anchor=middle" << (inside ? " class=inbar" : "") << ">" << fmt("%.2f", p.efficiency) << "</text><text x="
      << fmt("%.1f", x + bw / 2) << " y=" << h - pad + 16 << " text-anchor=middle>" << p.ranks
      << (p.ranks == 1 ? " rank" : " ranks") << "</text></g>\n";
  }
  o << "</svg><div class=legend><span><i style='background:" << kKeptColor << "'></i>efficiency kept</span>";
  for (size_t t = 0; t < kLossTerms; ++t)
    o << "<span><i style='background:" << kTermColors[t] << "'></i>lost: " << loss_key(LossTerm(t)) << "</span>";
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
  o << "<!doctype html><html><head><meta charset=utf-8><title>stallscope scaling</title><style>" << html::kStyle
    << "</style></head><body><h1>scaling study</h1>\n";
  for (const auto& w : s.warnings) o << "<p class=warn>warning: " << html::esc(w) << "</p>\n";
  if (s.points.empty()) {
    o << "<p>no usable run</p></body></html>\n";
    return;
  }
  const ScalingPoint& last = s.points.back();
  o << "<p class=summary>" << last.ranks << " ranks keep " << fmt("%.0f %%", last.efficiency * 100)
    << " of ideal scaling against " << s.base_ranks << (s.base_ranks == 1 ? " rank" : " ranks");
  if (s.points.size() > 1) {
    size_t best = 0;
    for (size_t t = 1; t < kLossTerms; ++t)
      if (last.lost[t] > last.lost[best]) best = t;
    if (last.lost[best] > 0)
      o << "; the largest loss is " << loss_key(LossTerm(best)) << " (" << fmt("%.0f %%", last.lost[best] * 100)
        << " of ideal)";
  }
  o << ".</p>\n";
  if (!last.straggler.empty()) o << "<p>" << html::esc(last.straggler) << "</p>\n";
  o << "<h3>efficiency kept and lost</h3>\n";
  split_bars(o, s);
  o << "<h3>efficiency against ranks</h3>\n";
  efficiency_plot(o, s);
  o << "<table><tr><th>ranks</th><th>step ms</th><th>throughput /s</th><th>efficiency</th>";
  for (size_t t = 0; t < kLossTerms; ++t) o << "<th>lost: " << loss_key(LossTerm(t)) << "</th>";
  o << "</tr>\n";
  for (const auto& p : s.points) {
    o << "<tr><td>" << p.ranks << "</td><td>" << fmt("%.2f", p.step_ms) << "</td><td>"
      << fmt("%.1f", p.throughput) << "</td><td>" << fmt("%.3f", p.efficiency) << "</td>";
    for (size_t t = 0; t < kLossTerms; ++t) o << "<td>" << fmt("%.3f", p.lost[t]) << "</td>";
    o << "</tr>\n";
  }
  o << "</table><p>efficiency(N) = throughput(N) / (N &times; throughput(1)); the lost terms sum to "
       "1 &minus; efficiency (docs/scaling.md)</p></body></html>\n";
}

}  // namespace stallscope::analyzer
