// What the HTML pages (the report, the diff, the scaling study) share: the
// part colours, escaping, number formatting and the axis ticks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "stallscope/analyzer/parts.hpp"

namespace stallscope::analyzer::html {

inline constexpr const char* kColors[kPartCount] = {"#2e7d32", "#6a1b9a", "#ab47bc", "#1565c0", "#64b5f6",
                                                    "#e65100", "#ffb300", "#fff176", "#bdbdbd", "#c62828",
                                                    "#ef9a9a", "#795548", "#9e9e9e"};
inline constexpr const char* kOtherColor = "#cfd8dc";

inline std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

inline std::string num(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// A round tick step (1, 2 or 5 × 10^k) giving about `ticks` ticks up to `top`.
inline double tick_step(double top, int ticks) {
  if (top <= 0 || ticks <= 0) return 1;
  const double raw = top / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// A tick's label with as many decimals as its step needs ("%.0f" for 5,
// "%.2f" for 0.05).
inline std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : std::min(6, int(std::ceil(-std::log10(step) - 1e-9)));
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

// The pages' common style sheet: body, headings, tables, legends, cards, the
// SVG classes the charts use, and print rules.
inline constexpr const char* kStyle =
    "body{font:14px/1.4 sans-serif;margin:20px auto;max-width:980px;color:#212121}"
    "h1{font-size:20px;margin:0 0 8px}h2{font-size:18px;border-top:2px solid #90a4ae;padding-top:10px}"
    "h3{font-size:15px;margin:18px 0 6px}h4{margin:0 0 4px;font-size:15px}"
    "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}"
    ".summary{font-size:18px;font-weight:bold;margin:6px 0}.top{font-size:15px;margin:4px 0 8px;"
    "background:#e8f5e9;padding:6px 8px;border-left:4px solid #2e7d32}"
    ".facts span{margin-right:16px;white-space:nowrap}.note{color:#546e7a;font-size:12px;margin:2px 0}"
    "i{display:inline-block;width:10px;height:10px;margin-right:4px}.legend span{margin-right:12px;white-space:nowrap}"
    ".legend{font-size:12px;margin:4px 0}.warn{color:#b71c1c}code{background:#eceff1;padding:0 3px}"
    ".card{border:1px solid #cfd8dc;border-radius:4px;padding:8px 10px;margin:8px 0;break-inside:avoid}"
    ".card p{margin:3px 0}.gain{font-size:15px}.ev{color:#37474f}"
    "svg{display:block;margin:4px 0;overflow:visible}svg text{font:11px sans-serif;fill:#37474f}"
    "svg .lane{font-size:12px;fill:#212121}svg .inbar{fill:#fff;font-size:11px}"
    ".halo{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}"
    ".grid{stroke:#eceff1}.warm{opacity:.4}.max{stroke:#263238}.clip{fill:#c62828}"
    ".pline{stroke:#263238;stroke-dasharray:4 3}.p90{stroke:#78909c}.demand{stroke:#263238;stroke-dasharray:3 2}"
    ".ok{fill:#81c784}.short{fill:#e57373}.budget{fill:#eceff1}.before{opacity:.45}"
    ".predicted{fill:none;stroke:#263238;stroke-width:1.5;stroke-dasharray:4 2}.measured{fill:#42a5f5}"
    ".worse{fill:#e57373}.ideal{stroke:#78909c;stroke-dasharray:4 3;fill:none}.eff{stroke:#1565c0;stroke-width:2;fill:none}"
    "@media print{body{margin:0;max-width:none}details{display:block}details>*{display:block}"
    "section{break-before:page}.card{break-inside:avoid}}";

}  // namespace stallscope::analyzer::html
