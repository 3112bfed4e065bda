// The HTML report: one self-contained page (inline SVG and CSS, nothing
// loaded from anywhere, no script), laid out for reading rather than for
// printing every number (docs/report-guide.md walks through it):
//   the verdict and the top remedy in one sentence each;
//   the share of each part of the steady steps in one bar;
//   the parts of every step (buckets of steps with their median and longest
//   in long runs), scaled to the steady steps, p50 and p90 drawn;
//   timelines of a typical and the longest step with a time axis, one lane
//   per activity, the step's attribution beneath;
//   capacity against demand per stage and the CPU budget against its use;
//   the remedies as cards, then what was considered and not proposed.
// Every number it draws is in the JSON report (step_buckets, timelines).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "html_common.hpp"
#include "multirank/cross_render.hpp"
#include "stallscope/analyzer/render.hpp"

namespace stallscope::analyzer {

namespace {

using namespace html;

constexpr int kW = 960;                  // page content width, px
constexpr int kAxisW = 56;               // left margin of the charts (axis labels)
constexpr double kFoldShare = 0.005;     // parts under 0.5 % fold into "other"

std::string ms(int64_t ns) { return num("%.2f", double(ns) / 1e6); }
std::string label(Part p) { return esc(part_label(p)); }

// The parts that get their own colour: at least 0.5 % of the steady steps.
std::array<bool, kPartCount> shown_parts(const RankReport& r) {
  std::array<bool, kPartCount> s{};
  for (size_t p = 0; p < kPartCount; ++p) s[p] = r.parts[p].share >= kFoldShare;
  return s;
}

const char* fill(size_t p, const std::array<bool, kPartCount>& shown) {
  return shown[p] ? kColors[p] : kOtherColor;
}

// --- the head: verdict, top remedy, the run in numbers ----------------------

std::string pct(double part, double whole) { return whole > 0 ? num("%.0f %%", part / whole * 100) : "?"; }

void top_remedy(std::ostream& o, const RankReport& r) {
  if (r.remedies.empty()) {
    o << "<p class=top>No remedy proposed"
      << (r.rejected_remedies.empty() ? std::string(".") : ": see what was considered below.") << "</p>\n";
    return;
  }
  const Remedy& m = r.remedies.front();
  o << "<p class=top>Top remedy: <b>" << esc(m.title) << "</b>";
  if (!m.pytorch_knob.empty())
    o << ": <code>" << esc(m.pytorch_knob) << "</code>";
  o << ". Step " << num("%.2f", m.step_ms) << " ms &rarr; " << (m.bound ? "at best " : "")
    << num("%.2f", m.predicted_step_ms) << " ms (" << pct(m.gain_ms(), m.step_ms) << " faster).";
  if (const std::string t = try_command(m.settings, r.command); m.pytorch_knob.empty() && !t.empty())
    o << " Try it: <code>" << esc(t) << "</code>";
  o << "</p>\n";
}

void facts(std::ostream& o, const RankReport& r) {
  o << "<p class=facts><span>step p50 <b>" << num("%.2f", r.step_p50_ms) << " ms</b></span><span>p90 <b>"
    << num("%.2f", r.step_p90_ms) << " ms</b></span><span>" << r.steps.size() << " steps (" << r.warmup_steps
    << " warm-up, " << r.steady_steps << " steady)</span><span>steps from " << step_source_key(r.source);
  if (!r.source_detail.empty()) o << " (" << esc(r.source_detail) << ")";
  o << "</span><span>compute basis " << esc(r.compute_basis) << "</span>";
  if (r.headspace.ceiling_ms > 0)
    o << "<span>headspace ceiling <b>" << num("%.2f", r.headspace.ceiling_ms) << " ms</b></span>";
  o << "</p>\n";
}

// --- the share of each part -------------------------------------------------

void parts_bar(std::ostream& o, const RankReport& r) {
  const auto shown = shown_parts(r);
  const int h = 28;
  o << "<svg class=partbar width=" << kW << " height=" << h << " role=img><title>share of each part in the "
    << "steady steps</title>";
  double x = 0, other = 0;
  std::string other_list;
  for (size_t p = 0; p < kPartCount; ++p) {
    const PartStat& s = r.parts[p];
    if (s.share <= 0) continue;
    if (!shown[p]) {
      other += s.share;
      other_list += (other_list.empty() ? "" : ", ") + std::string(part_label(Part(p))) + num(" %.2f %%", s.share * 100);
      continue;
    }
    const double w = s.share * kW;
    o << "<g><title>" << label(Part(p)) << num(": %.1f %%", s.share * 100) << num(", p50 %.2f ms", s.p50_ms)
      << num(", p90 %.2f ms", s.p90_ms) << "</title><rect x=" << num("%.1f", x) << " y=0 width=" << num("%.1f", w)
      << " height=" << h << " fill='" << kColors[p] << "'/>";
    const std::string text = std::string(part_label(Part(p))) + num(" %.0f%%", s.share * 100);
    if (w > 7.0 * double(text.size()) + 8)
      o << "<text x=" << num("%.1f", x + 4) << " y=18 class=inbar>" << label(Part(p)) << num(" %.0f%%", s.share * 100)
        << "</text>";
    o << "</g>";
    x += w;
  }
  if (other > 0)
    o << "<g><title>other: " << esc(other_list) << "</title><rect x=" << num("%.1f", x) << " y=0 width="
      << num("%.1f", other * kW) << " height=" << h << " fill='" << kOtherColor << "'/></g>";
  o << "</svg>\n<div class=legend>";
  for (size_t p = 0; p < kPartCount; ++p)
    if (shown[p])
      o << "<span><i style='background:" << kColors[p] << "'></i>" << label(Part(p))
        << num(" %.1f %%", r.parts[p].share * 100) << "</span>";
  if (other > 0)
    o << "<span><i style='background:" << kOtherColor << "'></i>other (parts under 0.5 %)"
      << num(" %.1f %%", other * 100) << "</span>";
  o << "</div>\n";
}

// --- the steps chart ----------------------------------------------------------

// The steps chart's plot area: heights in px, the axis's full scale in ns.
struct ChartGeom {
  int ch = 220, top = 12, bottom = 22;
  int64_t scale = 0;
  double yscale = 0;
  bool bucketed = false;
};

// One bar of the steps chart at `x`, `w` wide: its title, its parts
// stacked, the bucket's longest step ticked. True when it is clipped.
bool step_bar(std::ostream& o, const StepBucket& b, double x, double w, const ChartGeom& g,
              const std::array<bool, kPartCount>& shown) {
  o << "<g" << (b.warmup ? " class=warm" : "") << "><title>";
  if (b.steps == 1)
    o << "step " << b.first << ": " << ms(b.median_wall_ns) << " ms" << (b.warmup ? " (warm-up)" : "")
      << (b.outlier ? " (outlier)" : "");
  else
    o << "steps " << b.first << "-" << b.last << ": median " << ms(b.median_wall_ns) << " ms (step " << b.median_index
      << "), longest " << ms(b.max_wall_ns) << " ms (step " << b.max_index << ")" << (b.outlier ? ", an outlier" : "");
  for (size_t p = 0; p < kPartCount; ++p)
    if (b.median_parts[p] > 0) o << "&#10;" << label(Part(p)) << " " << ms(b.median_parts[p]) << " ms";
  o << "</title>";
  // Each part a vertical stroke of the bar's width (the group sets it):
  // a third of a rect's markup, for pages of many ranks and steps.
  const std::string cx = num("%.1f", x + w / 2);
  double y = g.top + g.ch;
  for (size_t p = 0; p < kPartCount; ++p) {
    double h = double(b.median_parts[p]) * g.yscale;
    if (h <= 0) continue;
    h = std::min(h, y - g.top);
    if (h <= 0) break;
    o << "<path d='M" << cx << " " << num("%.1f", y) << "V" << num("%.1f", y - h) << "' stroke='" << fill(p, shown)
      << "'/>";
    y -= h;
  }
  if (g.bucketed && b.max_wall_ns > b.median_wall_ns) {
    const double my = std::max(double(g.top), g.top + g.ch - double(b.max_wall_ns) * g.yscale);
    o << "<path class=max d='M" << cx << " " << num("%.1f", my) << "v1.5'/>";
  }
  const int64_t tallest = g.bucketed ? b.max_wall_ns : b.median_wall_ns;
  const bool clipped = tallest > g.scale;
  if (clipped) o << "<path class=clip d='M" << num("%.1f", x + w / 2 - 4) << " " << g.top << "h8l-4 -7z'/>";
  o << "</g>\n";
  return clipped;
}

void steps_chart(std::ostream& o, const RankReport& r, size_t max_bars) {
  if (r.steps.empty()) return;
  const auto shown = shown_parts(r);
  const std::vector<StepBucket> buckets = step_buckets(r, max_bars);
  ChartGeom g;
  g.scale = chart_scale_ns(r);
  const int ch = g.ch, top = g.top, bottom = g.bottom;
  const double plot_w = kW - kAxisW;
  const double bw = plot_w / double(buckets.size());
  g.yscale = double(ch) / double(g.scale);
  g.bucketed = buckets.front().steps > 1;
  o << "<svg class=steps width=" << kW << " height=" << ch + top + bottom << " role=img><title>parts of "
    << (g.bucketed ? "each bucket's median step" : "every step") << ", scaled to the steady steps</title>\n";
  // Axis: ticks in ms.
  const double step_ms = tick_step(double(g.scale) / 1e6, 5);
  for (double t = 0; t * 1e6 <= double(g.scale); t += step_ms) {
    const double y = top + ch - t * 1e6 * g.yscale;
    o << "<line x1=" << kAxisW - 4 << " x2=" << kW << " y1=" << num("%.1f", y) << " y2=" << num("%.1f", y)
      << " class=grid /><text x=" << kAxisW - 6 << " y=" << num("%.1f", y + 4) << " class=ax text-anchor=end>"
      << tick_label(t, step_ms) << "</text>";
  }
  o << "<text x=0 y=" << top - 2 << " class=ax>ms</text>\n";
  size_t clipped = 0;
  const double w = std::max(bw - (bw > 3 ? 1.0 : 0.2), 0.5);
  o << "<g stroke-width=" << num("%.1f", w) << ">\n";
  for (size_t k = 0; k < buckets.size(); ++k) clipped += step_bar(o, buckets[k], kAxisW + double(k) * bw, w, g, shown);
  o << "</g>\n";
  // p50 and p90 of the steady steps.
  for (const auto& [name, v] : {std::pair{"p50", r.step_p50_ms}, std::pair{"p90", r.step_p90_ms}}) {
    if (v <= 0 || v * 1e6 > double(g.scale)) continue;
    const double y = top + ch - v * 1e6 * g.yscale;
    o << "<line x1=" << kAxisW << " x2=" << kW << " y1=" << num("%.1f", y) << " y2=" << num("%.1f", y)
      << " class='pline " << name << "' /><text x=" << kW - 2 << " y="
      << num("%.1f", name == std::string_view("p90") ? y - 3 : y + 11)  // p50 beneath its line: never on p90's
      << " class='ax halo' text-anchor=end>" << name << num(" %.2f ms", v) << "</text>";
  }
  // The x axis: a few step indices.
  const size_t marks = std::min<size_t>(buckets.size(), 8);
  for (size_t m = 0; m < marks; ++m) {
    const size_t k = marks == 1 ? 0 : m * (buckets.size() - 1) / (marks - 1);
    o << "<text x=" << num("%.1f", kAxisW + (double(k) + 0.5) * bw) << " y=" << top + ch + 15
      << " class=ax text-anchor=middle>" << buckets[k].first << "</text>";
  }
  o << "</svg>\n<p class=note>" << (g.bucketed ? "Each bar is the median step of " + std::to_string(buckets.front().steps) +
                                                     " consecutive steps; the dark tick is the longest of them. "
                                               : std::string("One bar per step. "))
    << "The axis is scaled to the steady steps (" << ms(g.scale) << " ms)";
  if (clipped > 0) o << "; " << clipped << (clipped == 1 ? " bar is" : " bars are") << " taller, clipped and marked &#9650;";
  o << ". Faded: warm-up. Hover a bar for its parts.</p>\n";
}

// --- timelines ----------------------------------------------------------------

const char* lane_color(const std::string& kind) {
  const std::string& name = kind;
  if (name == "compute") return kColors[idx(Part::kCompute)];
  if (name == "comm") return kColors[idx(Part::kCommTransfer)];
  if (name == "h2d") return kColors[idx(Part::kCopyH2D)];
  if (name == "other") return kColors[idx(Part::kCopyOther)];
  if (name == "reads") return kColors[idx(Part::kDataStorage)];
  if (name == "preprocess") return kColors[idx(Part::kDataPreprocess)];
  if (name == "api") return kColors[idx(Part::kHostLaunch)];
  if (name == "data wait") return kColors[idx(Part::kDataUnknown)];
  return "#455a64";
}

// A lane label that fits the label column: the end (what the lane holds)
// is kept, the middle gives way. The whole name is in the lane's title.
std::string short_label(const std::string& name, size_t max_chars) {
  if (name.size() <= max_chars) return name;
  const size_t colon = name.rfind(": ");
  const std::string tail = colon == std::string::npos ? std::string() : name.substr(colon);
  const auto head = [&](size_t n) {  // never cuts a UTF-8 sequence
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
    return name.substr(0, n);
  };
  if (tail.size() + 4 >= max_chars) return head(max_chars - 1) + "\u2026";
  return head(max_chars - tail.size() - 1) + "\u2026" + tail;
}

void timeline(std::ostream& o, const RankReport& r, const Timeline& t) {
  const int lane_h = 18, label_w = 260, axis_h = 18;
  const double plot_w = kW - label_w;
  const double scale = plot_w / double(std::max<int64_t>(t.wall_ns, 1));
  std::vector<const Lane*> shown;  // lanes with something in them
  for (const Lane& l : t.lanes)
    if (!l.spans.empty()) shown.push_back(&l);
  const int lanes = int(shown.size());
  const int attr_y = lanes * lane_h + 6;
  o << "<h3>" << esc(t.why) << " step " << t.index << " (" << ms(t.wall_ns) << " ms)</h3>\n";
  o << "<svg class=timeline width=" << kW << " height=" << attr_y + lane_h + axis_h + 4 << " role=img><title>"
    << esc(t.why) << " step " << t.index << ": what ran when</title>\n";
  for (int i = 0; i < lanes; ++i) {
    const Lane& l = *shown[size_t(i)];
    const int y = i * lane_h;
    int64_t busy = 0;
    for (const auto& [a, b] : l.spans) busy += b - a;
    o << "<g><title>" << esc(l.name) << ": " << l.spans.size() << " spans, " << ms(busy) << " ms busy</title><text x=0 y="
      << y + 13 << " class=lane>" << esc(short_label(l.name, 40)) << "</text>";
    // Spans closer than a pixel are drawn as one: the page stays small
    // whatever the step held.
    double run_a = -1, run_b = -1;
    const auto flush = [&] {
      if (run_a < 0) return;
      o << "<rect x=" << num("%.1f", label_w + run_a) << " y=" << y + 2 << " width="
        << num("%.1f", std::max(run_b - run_a, 0.5)) << " height=" << lane_h - 4 << " fill='" << lane_color(l.kind)
        << "'/>";
    };
    for (const auto& [a, b] : l.spans) {
      const double xa = double(a) * scale, xb = double(b) * scale;
      if (run_a >= 0 && xa <= run_b + 1.0) {
        run_b = std::max(run_b, xb);
        continue;
      }
      flush();
      run_a = xa;
      run_b = xb;
    }
    flush();
    o << "</g>\n";
  }
  // The step's attribution beneath: shares, not positions.
  const StepResult* step = nullptr;
  StepResult found;
  for (size_t i = 0; i < r.steps.size(); ++i)
    if (r.steps[i].index == t.index) {
      found = r.steps[i];
      step = &found;
      break;
    }
  if (step != nullptr) {
    o << "<text x=0 y=" << attr_y + 13 << " class=lane>attribution</text>";
    double x = label_w;
    const int64_t wall = std::max<int64_t>(step->wall(), 1);
    for (size_t p = 0; p < kPartCount; ++p) {
      if (step->parts[p] <= 0) continue;
      const double w = double(step->parts[p]) / double(wall) * plot_w;
      o << "<rect x=" << num("%.1f", x) << " y=" << attr_y + 2 << " width=" << num("%.1f", w) << " height="
        << lane_h - 4 << " fill='" << kColors[p] << "'><title>" << label(Part(p)) << " " << ms(step->parts[p])
        << " ms</title></rect>";
      x += w;
    }
    o << "\n";
  }
  const int ay = attr_y + lane_h + 2;
  const double tick = tick_step(double(t.wall_ns) / 1e6, 8);
  for (double v = 0; v * 1e6 <= double(t.wall_ns) + 1; v += tick) {
    const double x = label_w + v * 1e6 * scale;
    o << "<line x1=" << num("%.1f", x) << " x2=" << num("%.1f", x) << " y1=0 y2=" << ay << " class=grid />"
      << "<text x=" << num("%.1f", x) << " y=" << ay + 12 << " class=ax text-anchor=middle>"
      << tick_label(v, tick) << "</text>";
  }
  o << "<text x=0 y=" << ay + 12 << " class=ax>ms into the step</text></svg>\n";
}

// --- capacity against demand, the CPU budget ----------------------------------

void capacity(std::ostream& o, const RankReport& r) {
  std::vector<const Stage*> rows;
  for (const Stage& s : r.stages)
    if (s.measured && s.demand > 0 && s.capacity > 0) rows.push_back(&s);
  if (rows.empty() && !r.cpu.known) return;
  o << "<h3>capacity against demand</h3>\n";
  const int row_h = 22, label_w = 130;
  const double plot_w = kW - label_w - 230;
  double top = 2.0;  // the axis reaches 2× the demand, or the largest headroom shown
  for (const Stage* s : rows) top = std::max(top, std::min(s->headroom(), 10.0));
  if (r.cpu.known && r.cpu.headroom() > 0) top = std::max(top, std::min(r.cpu.headroom(), 10.0));
  const size_t n = rows.size() + (r.cpu.known && r.cpu.capacity > 0 ? 1 : 0);
  o << "<svg class=capacity width=" << kW << " height=" << int(n) * row_h + 20 << " role=img><title>each stage's "
    << "capacity (batches a second) against the trainer's demand</title>\n";
  const auto row = [&](int i, const std::string& name, double cap, double demand, const std::string& more) {
    const double h = demand > 0 ? cap / demand : 0;
    const int y = i * row_h;
    const double w = std::min(h, top) / top * plot_w;
    o << "<g><title>" << esc(name) << num(": capacity %.1f/s", cap) << num(", demand %.1f/s", demand)
      << num(", headroom %.2fx", h) << esc(more) << "</title><text x=0 y=" << y + 15 << " class=lane>" << esc(name)
      << "</text><rect x=" << label_w << " y=" << y + 3 << " width=" << num("%.1f", std::max(w, 1.0)) << " height="
      << row_h - 6 << " class=" << (h < 1.05 ? "short" : "ok") << " /><text x=" << label_w + plot_w + 8 << " y="
      << y + 15 << " class=ax>" << num("%.1f/s", cap) << num(" vs %.1f/s", demand) << num(" (%.2fx)", h)
      << (h > top ? " &#9654;" : "") << "</text></g>\n";
  };
  int i = 0;
  for (const Stage* s : rows) row(i++, std::string(s->name()), s->capacity, s->demand, "");
  if (r.cpu.known && r.cpu.capacity > 0)
    row(i++, "CPU budget", r.cpu.capacity, r.cpu.demand, num(" (%.2f cores used", r.cpu.used_cores) +
                                                            num(" of %.2f)", r.cpu.budget_cores));
  const double dx = label_w + 1.0 / top * plot_w;
  o << "<line x1=" << num("%.1f", dx) << " x2=" << num("%.1f", dx) << " y1=0 y2=" << i * row_h
    << " class=demand /><text x=" << num("%.1f", dx) << " y=" << i * row_h + 14
    << " class=ax text-anchor=middle>demand</text></svg>\n";
  if (r.cpu.known) {
    o << "<p>CPU budget " << num("%.2f", r.cpu.budget_cores) << " cores (" << num("%.0f", r.cpu.affinity_cpus)
      << " CPUs in the affinity set" << (r.cpu.quota_cores > 0 ? num(", quota %.2f", r.cpu.quota_cores) : "")
      << (r.cpu.ranks_on_node > 1 ? ", shared by " + std::to_string(r.cpu.ranks_on_node) + " ranks" : "")
      << "), used " << num("%.2f", r.cpu.used_cores) << " (" << num("%.0f %%", r.cpu.utilization * 100) << ")";
    if (r.cpu.idle_during_stalls >= 0) o << "; " << num("%.1f", r.cpu.idle_during_stalls) << " CPUs idle during stalls";
    if (r.cpu.throttled_ms > 0) o << "; throttled " << num("%.0f ms", r.cpu.throttled_ms);
    o << ".</p>\n";
    const double budget = std::max(r.cpu.budget_cores, r.cpu.used_cores);
    if (budget > 0) {
      const double w = kW - label_w - 230;
      o << "<svg class=cpu width=" << kW << " height=22 role=img><title>CPU cores used against the budget</title>"
        << "<text x=0 y=15 class=lane>cores used</text><rect x=" << label_w << " y=3 width=" << num("%.1f", w)
        << " height=16 class=budget /><rect x=" << label_w << " y=3 width="
        << num("%.1f", std::max(r.cpu.used_cores / budget * w, 1.0)) << " height=16 class="
        << (r.cpu.utilization > 0.9 ? "short" : "ok") << " /><text x=" << label_w + int(w) + 8
        << " y=15 class=ax>" << num("%.2f", r.cpu.used_cores) << num(" of %.2f cores", r.cpu.budget_cores)
        << "</text></svg>\n";
    }
  }
}

// --- remedies -------------------------------------------------------------------

void remedies(std::ostream& o, const RankReport& r) {
  o << "<h3>remedies</h3>\n";
  if (r.remedies.empty()) o << "<p>None proposed.</p>\n";
  for (size_t i = 0; i < r.remedies.size(); ++i) {
    const Remedy& m = r.remedies[i];
    o << "<div class=card><h4>" << i + 1 << ". " << esc(m.title) << "</h4><p class=gain>step "
      << num("%.2f", m.step_ms) << " ms &rarr; " << (m.bound ? "at best " : "") << num("%.2f", m.predicted_step_ms)
      << " ms: <b>" << num("%.2f", m.gain_ms()) << " ms (" << pct(m.gain_ms(), m.step_ms) << ")</b> faster</p>";
    if (!m.pytorch_knob.empty())
      o << "<p>" << (m.knob_for == "program" ? "in the program" : "PyTorch") << ": <code>" << esc(m.pytorch_knob)
        << "</code></p>";
    if (!m.loader_knob.empty()) o << "<p>stallscope loader: <code>" << esc(m.loader_knob) << "</code></p>";
    if (const std::string t = try_command(m.settings, r.command); !t.empty())
      o << "<p>try: <code>" << esc(t) << "</code></p>";
    o << "<p class=ev>" << esc(m.evidence) << "</p><details><summary>model</summary><p>" << esc(m.model)
      << " [" << esc(m.inputs_from) << "]";
    for (const Number& x : m.inputs)
      o << "<br>" << esc(x.name) << " = " << num("%.4g", x.value) << " " << esc(x.unit);
    o << "</p></details></div>\n";
  }
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
  o << "<details><summary>every part in numbers</summary><table><tr><th>part</th><th>p50 ms</th><th>p90 ms</th>"
       "<th>total ms</th><th>%</th></tr>\n";
  for (size_t p = 0; p < kPartCount; ++p) {
    const PartStat& s = r.parts[p];
    o << "<tr><td><i style='background:" << kColors[p] << "'></i>" << label(Part(p)) << "</td><td>"
      << num("%.2f", s.p50_ms) << "</td><td>" << num("%.2f", s.p90_ms) << "</td><td>" << ms(s.total_ns) << "</td><td>"
      << num("%.1f", s.share * 100) << "</td></tr>\n";
  }
  o << "</table></details>\n";
}

void rank_section(std::ostream& o, const RankReport& r, size_t max_bars) {
  o << "<section><h2>" << (r.rank >= 0 ? "rank " + std::to_string(r.rank) : std::string("single process")) << " "
    << esc(r.host) << "</h2><p class=summary>" << esc(r.summary) << "</p>\n";
  top_remedy(o, r);
  facts(o, r);
  for (const auto& w : r.warnings) o << "<p class=warn>warning: " << esc(w) << "</p>\n";
  if (!r.steps.empty()) {
    o << "<h3>where the step time goes</h3>\n";
    parts_bar(o, r);
    o << "<h3>steps</h3>\n";
    steps_chart(o, r, max_bars);
  }
  for (const auto& t : r.timelines) timeline(o, r, t);
  capacity(o, r);
  remedies(o, r);
  dataloaders(o, r);
  parts_table(o, r);
  o << "</section>\n";
}

}  // namespace

void write_html(std::ostream& o, const Report& r) {
  o << "<!doctype html><html><head><meta charset=utf-8><meta name=viewport content='width=device-width'>"
       "<title>stallscope report</title><style>"
    << html::kStyle << "</style></head><body><h1>stallscope report</h1>\n";
  for (const auto& e : r.errors) o << "<p class=warn>error: " << esc(e) << "</p>\n";
  write_cross_html(o, r, html::kColors);
  const std::vector<size_t> shown = shown_ranks(r);
  const size_t bars = step_chart_bars(r.ranks.size());
  for (size_t i : shown) rank_section(o, r.ranks[i], bars);
  if (shown.size() < r.ranks.size())
    o << "<p>" << r.ranks.size() - shown.size() << " more ranks not shown (see the JSON report)</p>\n";
  o << "</body></html>\n";
}

}  // namespace stallscope::analyzer
