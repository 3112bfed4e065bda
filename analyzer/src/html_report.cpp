// The HTML report: one self-contained page (inline SVG and CSS, no script
// loaded from anywhere) with the summary, a stacked bar chart of the parts
// of every step, timelines of a typical and the longest step, the remedies.
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "multirank/cross_render.hpp"
#include "stallscope/analyzer/render.hpp"

namespace stallscope::analyzer {

namespace {

constexpr const char* kColors[kPartCount] = {"#2e7d32", "#6a1b9a", "#ab47bc", "#1565c0", "#64b5f6",
                                             "#e65100", "#ffb300", "#fff176", "#bdbdbd", "#c62828",
                                             "#ef9a9a", "#795548", "#9e9e9e"};
constexpr int kChartW = 960, kChartH = 260, kMaxBars = 480;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

void legend(std::ostream& o) {
  o << "<div class=legend>";
  for (size_t p = 0; p < kPartCount; ++p)
    o << "<span><i style='background:" << kColors[p] << "'></i>" << esc(std::string(part_label(Part(p)))) << "</span>";
  o << "</div>\n";
}

void bars(std::ostream& o, const RankReport& r) {
  if (r.steps.empty()) return;
  const size_t every = (r.steps.size() + kMaxBars - 1) / kMaxBars;
  int64_t max_wall = 1;
  for (const auto& s : r.steps) max_wall = std::max(max_wall, s.wall());
  const size_t n = (r.steps.size() + every - 1) / every;
  const double w = double(kChartW) / double(n);
  o << "<svg width=" << kChartW << " height=" << kChartH + 20 << " role=img><title>parts per step</title>\n";
  for (size_t i = 0, k = 0; i < r.steps.size(); i += every, ++k) {
    const StepResult& s = r.steps[i];
    double y = kChartH;
    for (size_t p = 0; p < kPartCount; ++p) {
      const double h = double(s.parts[p]) / double(max_wall) * kChartH;
      if (h <= 0) continue;
      y -= h;
      o << "<rect x=" << num("%.2f", double(k) * w) << " y=" << num("%.2f", y) << " width=" << num("%.2f", std::max(w - 0.3, 0.5))
        << " height=" << num("%.2f", h) << " fill='" << kColors[p] << "'"
        << (s.warmup ? " opacity=0.4" : "") << "><title>step " << s.index << ": "
        << esc(std::string(part_label(Part(p)))) << num(" %.2f ms", double(s.parts[p]) / 1e6) << "</title></rect>";
    }
    o << "\n";
  }
  o << "<text x=0 y=" << kChartH + 15 << " font-size=11>max " << num("%.1f ms", double(max_wall) / 1e6)
    << (every > 1 ? "; every " + std::to_string(every) + "th step shown" : std::string()) << "; faded = warm-up</text></svg>\n";
}

const char* lane_color(const std::string& name) {
  if (name == "compute") return kColors[idx(Part::kCompute)];
  if (name == "comm") return kColors[idx(Part::kCommTransfer)];
  if (name == "h2d") return kColors[idx(Part::kCopyH2D)];
  if (name == "other") return kColors[idx(Part::kCopyOther)];
  if (name == "reads") return kColors[idx(Part::kDataStorage)];
  if (name == "preprocess") return kColors[idx(Part::kDataPreprocess)];
  if (name == "api") return kColors[idx(Part::kHostLaunch)];
  return "#455a64";
}

void timeline(std::ostream& o, const Timeline& t) {
  const int lane_h = 18, label_w = 90;
  const double scale = double(kChartW - label_w) / double(std::max<int64_t>(t.wall_ns, 1));
  o << "<h3>" << esc(t.why) << " step " << t.index << num(" (%.2f ms)", double(t.wall_ns) / 1e6) << "</h3>\n";
  o << "<svg width=" << kChartW << " height=" << lane_h * int(t.lanes.size()) + 4 << ">\n";
  for (size_t i = 0; i < t.lanes.size(); ++i) {
    const Lane& l = t.lanes[i];
    const int y = int(i) * lane_h;
    o << "<text x=0 y=" << y + 13 << " font-size=12>" << esc(l.name) << "</text>";
    for (const auto& [a, b] : l.spans)
      o << "<rect x=" << num("%.2f", label_w + double(a) * scale) << " y=" << y + 2 << " width="
        << num("%.2f", std::max(double(b - a) * scale, 0.5)) << " height=" << lane_h - 4 << " fill='"
        << lane_color(l.name) << "'/>";
    o << "\n";
  }
  o << "</svg>\n";
}

void remedies(std::ostream& o, const RankReport& r) {
  o << "<table><tr><th>remedy</th><th>predicted step</th><th>gain</th><th>evidence</th><th>model</th><th>knobs</th></tr>\n";
  for (const auto& m : r.remedies) {
    o << "<tr><td>" << esc(m.title) << "</td><td>" << (m.bound ? "at best " : "")
      << num("%.2f ms", m.predicted_step_ms) << "</td><td>" << num("%.2f ms", m.gain_ms()) << "</td><td>"
      << esc(m.evidence) << "</td><td>" << esc(m.model) << " [" << esc(m.inputs_from) << "]</td><td>loader: "
      << esc(m.loader_knob) << (m.knob_for == "program" ? "<br>program: " : "<br>PyTorch: ")
      << esc(m.pytorch_knob);
    if (!m.try_command.empty()) o << "<br>try: <code>" << esc(m.try_command) << "</code>";
    o << "</td></tr>\n";
  }
  o << "</table>\n";
  if (r.rejected_remedies.empty()) return;
  o << "<p>Considered, not proposed:</p><ul class='rejected'>\n";
  for (const auto& x : r.rejected_remedies)
    o << "<li><b>" << esc(x.title.empty() ? x.id : x.title) << "</b>: " << esc(x.reason) << "</li>\n";
  o << "</ul>\n";
}

// The DataLoader blocks (the text report has every number; this is the gist).
void dataloaders(std::ostream& o, const RankReport& r) {
  if (r.dataloaders.empty() && r.settings.empty()) return;
  o << "<h3>DataLoaders</h3><table><tr><th>site</th><th>config</th><th>batches</th>"
       "<th>wait ms: storage / preprocessing / collate / waiting for a worker / hand-off / head-of-line</th>"
       "<th>fetch / collate ms per batch</th></tr>\n";
  for (const auto& l : r.dataloaders) {
    const LoaderWaitSplit& w = l.split;
    o << "<tr><td>" << esc(l.site) << (l.fed_optimizer ? " (fed the optimizer)" : "") << "</td><td>"
      << esc(l.dataset) << ", num_workers=" << l.num_workers << ", prefetch_factor=" << l.prefetch_factor
      << ", pin_memory=" << esc(l.pin_memory) << ", persistent_workers=" << (l.persistent_workers ? "True" : "False")
      << ", batch_size=" << l.batch_size << "</td><td>" << l.batches << "</td><td>"
      << num("%.1f", w.storage_ms) << " / " << num("%.1f", w.preprocess_ms) << " / " << num("%.1f", w.collate_ms)
      << " / " << num("%.1f", w.worker_wait_ms) << " / " << num("%.1f", w.handoff_ms) << " / "
      << num("%.1f", w.head_of_line_ms) << "</td><td>" << num("%.2f", l.fetch_ms) << " / "
      << num("%.2f", l.collate_ms) << "</td></tr>\n";
  }
  o << "</table>\n";
  for (const auto& m : r.settings) o << "<p>set " << esc(m.status) << " " << esc(m.key) << "=" << esc(m.value)
                                     << (m.site.empty() ? "" : " at " + esc(m.site)) << " " << esc(m.detail) << "</p>\n";
}

void parts_table(std::ostream& o, const RankReport& r) {
  o << "<table><tr><th>part</th><th>p50 ms</th><th>p90 ms</th><th>%</th></tr>\n";
  for (size_t p = 0; p < kPartCount; ++p) {
    const PartStat& s = r.parts[p];
    o << "<tr><td><i style='background:" << kColors[p] << "'></i>" << esc(std::string(part_label(Part(p))))
      << "</td><td>" << num("%.2f", s.p50_ms) << "</td><td>" << num("%.2f", s.p90_ms) << "</td><td>"
      << num("%.1f", s.share * 100) << "</td></tr>\n";
  }
  o << "</table>\n";
}

void rank_section(std::ostream& o, const RankReport& r) {
  o << "<section><h2>" << (r.rank >= 0 ? "rank " + std::to_string(r.rank) : std::string("single process"))
    << " " << esc(r.host) << "</h2><p class=summary>" << esc(r.summary)
    << "</p><p>" << r.steps.size() << " steps from " << step_source_key(r.source) << " (" << esc(r.source_detail)
    << "), " << r.warmup_steps << " warm-up; compute basis " << esc(r.compute_basis) << "</p>\n";
  legend(o);
  bars(o, r);
  parts_table(o, r);
  for (const auto& t : r.timelines) timeline(o, t);
  dataloaders(o, r);
  o << "<h3>remedies</h3>\n";
  remedies(o, r);
  for (const auto& w : r.warnings) o << "<p class=warn>warning: " << esc(w) << "</p>\n";
  o << "</section>\n";
}

}  // namespace

void write_html(std::ostream& o, const Report& r) {
  o << "<!doctype html><html><head><meta charset=utf-8><title>stallscope report</title><style>"
       "body{font:14px sans-serif;margin:20px;max-width:1000px}table{border-collapse:collapse;margin:8px 0}"
       "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}.summary{font-size:18px;font-weight:bold}"
       "i{display:inline-block;width:10px;height:10px;margin-right:4px}.legend span{margin-right:10px}"
       ".warn{color:#b71c1c}</style></head><body><h1>stallscope report</h1>\n";
  for (const auto& e : r.errors) o << "<p class=warn>error: " << esc(e) << "</p>\n";
  write_cross_html(o, r, kColors);
  const std::vector<size_t> shown = shown_ranks(r);
  for (size_t i : shown) rank_section(o, r.ranks[i]);
  if (shown.size() < r.ranks.size())
    o << "<p>" << r.ranks.size() - shown.size() << " more ranks not shown (see the JSON report)</p>\n";
  o << "</body></html>\n";
}

}  // namespace stallscope::analyzer
