// `stallscope diff`: per-part deltas between two runs, and whether the gain
// run A's report predicted for each remedy shows up in run B.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "html_common.hpp"
#include "stallscope/internal/bounded_json.hpp"
#include "stallscope/analyzer/render.hpp"
#include "stallscope/file_summary.hpp"  // terminal_safe

namespace stallscope::analyzer {

namespace {

using nlohmann::json;

double mean_ms(const RankReport& r, size_t p) {
  return r.steady_steps > 0 ? double(r.parts[p].total_ns) / 1e6 / double(r.steady_steps) : 0;
}

double mean_step(const RankReport& r) {
  double s = 0;
  for (size_t p = 0; p < kPartCount; ++p) s += mean_ms(r, p);
  return s;
}

const RankReport* match(const Report& b, int64_t rank) {
  for (const auto& r : b.ranks) if (r.rank == rank) return &r;
  return b.ranks.empty() ? nullptr : &b.ranks[0];
}

// "delivered", "partly", "not delivered" for a predicted and an actual gain.
std::string verdict(const Remedy& m, double actual, double tol) {
  const double predicted = m.gain_ms();
  if (predicted <= 0) return "no gain predicted";
  if (m.bound) return actual > 0 ? (actual <= predicted * (1 + tol) ? "within bound" : "beyond bound") : "not delivered";
  if (actual >= predicted * (1 - tol)) return "delivered";
  return actual > 0.25 * predicted ? "partly" : "not delivered";
}

json rank_diff(const RankReport& a, const RankReport& b, const DiffOptions& opt) {
  json parts = json::object();
  for (size_t p = 0; p < kPartCount; ++p) {
    const double x = mean_ms(a, p), y = mean_ms(b, p);
    parts[std::string(part_key(Part(p)))] = {{"a_ms", x}, {"b_ms", y}, {"delta_ms", y - x}};
  }
  const double gain = mean_step(a) - mean_step(b);
  json rem = json::array();
  for (const auto& m : a.remedies) {
    const bool judged = opt.applied.empty() || opt.applied == m.id;
    rem.push_back({{"id", m.id}, {"title", m.title}, {"predicted_gain_ms", m.gain_ms()}, {"actual_gain_ms", gain},
                   {"bound", m.bound},
                   {"verdict", judged ? verdict(m, gain, opt.tolerance) : "not applied"}});
  }
  return {{"rank", a.rank}, {"a_step_ms", mean_step(a)}, {"b_step_ms", mean_step(b)},
          {"gain_ms", gain}, {"parts", parts}, {"remedies", rem}};
}

void print_rank(std::ostream& o, const json& d) {
  char line[200];
  std::snprintf(line, sizeof line, "rank %lld: mean steady step %.2f ms -> %.2f ms (%+.2f ms)\n",
                static_cast<long long>(d["rank"].get<int64_t>()), d["a_step_ms"].get<double>(),
                d["b_step_ms"].get<double>(), -d["gain_ms"].get<double>());
  o << line << "part                      A ms      B ms     delta\n";
  for (const auto& [key, v] : d["parts"].items()) {
    if (v["a_ms"].get<double>() == 0 && v["b_ms"].get<double>() == 0) continue;
    std::snprintf(line, sizeof line, "%-20s %9.2f %9.2f %+9.2f\n", key.c_str(), v["a_ms"].get<double>(),
                  v["b_ms"].get<double>(), v["delta_ms"].get<double>());
    o << line;
  }
  for (const auto& m : d["remedies"]) {
    std::snprintf(line, sizeof line, "remedy %-18s predicted gain %s%.2f ms, actual %.2f ms: %s\n",
                  m["id"].get<std::string>().c_str(), m["bound"].get<bool>() ? "at most " : "",
                  m["predicted_gain_ms"].get<double>(), m["actual_gain_ms"].get<double>(),
                  m["verdict"].get<std::string>().c_str());
    o << line;
  }
}

bool read_rank(const json& j, RankReport& r) {
  r.rank = j.at("rank").get<int64_t>();
  r.host = j.value("host", "");
  r.steady_steps = j.at("steps").at("steady").get<size_t>();
  r.step_p50_ms = j.at("steps").at("p50_ms").get<double>();
  for (size_t p = 0; p < kPartCount; ++p) {
    const json& parts = j.at("parts");
    const std::string key(part_key(Part(p)));
    // Reports before schema 1.8 have no data.handoff part: it was 0 there.
    if (Part(p) == Part::kDataHandoff && !parts.contains(key)) continue;
    const json& pj = parts.at(key);
    r.parts[p].total_ns = std::llround(pj.at("total_ms").get<double>() * 1e6);
    r.parts[p].share = pj.at("share").get<double>();
  }
  if (const auto h = j.find("headspace"); h != j.end() && h->is_object())
    r.headspace.replayed = h->value("replayed", false);
  for (const auto& m : j.at("remedies")) {
    Remedy x;
    x.id = m.at("id").get<std::string>();
    x.title = m.value("title", "");
    x.step_ms = m.at("step_ms").get<double>();
    x.predicted_step_ms = m.at("predicted_step_ms").get<double>();
    x.bound = m.at("bound").get<bool>();
    r.remedies.push_back(std::move(x));
  }
  return true;
}

}  // namespace

bool read_json(const std::string& text, Report& out, std::string* error) {
  // Only the depth is bounded: a long run's report is large, but shallow.
  constexpr size_t kAny = std::numeric_limits<size_t>::max();
  std::string why;
  const json j = detail::parse_bounded_json(text, &why, {kAny, detail::kMaxJsonDepth, kAny});
  if (j.is_discarded()) {
    *error = "not a stallscope report: the document " + why;
    return false;
  }
  if (!j.is_object() || j.value("schema", "") != "stallscope.report") {
    *error = "not a stallscope report (field 'schema')";
    return false;
  }
  if (j.value("schema_version", 0) > kSchemaVersion) {
    *error = "schema_version " + std::to_string(j.value("schema_version", 0)) + " is newer than this stallscope";
    return false;
  }
  try {
    for (const auto& rj : j.at("ranks")) {
      RankReport r;
      read_rank(rj, r);
      out.ranks.push_back(std::move(r));
    }
  } catch (const json::exception& e) {
    *error = std::string("bad report field: ") + e.what();
    return false;
  }
  return true;
}

void write_diff(std::ostream& out, const Report& a, const Report& b, const DiffOptions& opt) {
  json all = json::array();
  for (const auto& ra : a.ranks) {
    const RankReport* rb = match(b, ra.rank);
    if (rb != nullptr) all.push_back(rank_diff(ra, *rb, opt));
  }
  if (opt.json) {
    out << json{{"schema", "stallscope.diff"}, {"schema_version", 1}, {"ranks", all}}.dump(1) << "\n";
    return;
  }
  std::ostringstream text;
  for (const auto& d : all) print_rank(text, d);
  if (all.empty()) text << "no rank to compare\n";
  out << reader::terminal_safe(text.str());
}

namespace {

constexpr int kDiffW = 960, kDiffLabelW = 150, kDiffTextW = 340;
constexpr size_t kDiffRanks = 16;  // ranks drawn per section (the JSON has all)

// "%.2f" without a negative zero.
std::string signed_ms(double v) { return html::num("%.2f", std::abs(v) < 0.005 ? 0.0 : v); }

double part_of(const json& d, size_t p, const char* side) {
  return d["parts"][std::string(part_key(Part(p)))][side].get<double>();
}

// Before and after as two stacked bars on one scale.
void step_bars(std::ostream& o, const json& d) {
  const double a = d["a_step_ms"].get<double>(), b = d["b_step_ms"].get<double>();
  const double top = std::max({a, b, 1e-9});
  const double plot = kDiffW - kDiffLabelW - 120;
  const int h = 24;
  o << "<svg class=diffsteps width=" << kDiffW << " height=" << 2 * h + 8 << " role=img><title>mean steady step before "
    << "and after, by part</title>\n";
  int row = 0;
  for (const char* side : {"a_ms", "b_ms"}) {
    const int y = row * (h + 4);
    o << "<text x=0 y=" << y + 16 << " class=lane>" << (row == 0 ? "before" : "after") << "</text>";
    double x = kDiffLabelW;
    for (size_t p = 0; p < kPartCount; ++p) {
      const double v = part_of(d, p, side);
      if (v <= 0) continue;
      const double w = v / top * plot;
      o << "<rect x=" << html::num("%.1f", x) << " y=" << y << " width=" << html::num("%.1f", w) << " height=" << h
        << " fill='" << html::kColors[p] << "'><title>" << html::esc(part_label(Part(p))) << html::num(" %.2f ms", v)
        << "</title></rect>";
      x += w;
    }
    o << "<text x=" << html::num("%.1f", x + 6) << " y=" << y + 16 << " class=ax>"
      << html::num("%.2f ms", row == 0 ? a : b) << "</text>\n";
    ++row;
  }
  o << "</svg>\n";
}

// Each part that matters: before (faded) above after, with the change.
void part_rows(std::ostream& o, const json& d) {
  const double top = std::max({d["a_step_ms"].get<double>(), d["b_step_ms"].get<double>(), 1e-9});
  std::vector<size_t> rows;
  double widest = 1e-9;
  for (size_t p = 0; p < kPartCount; ++p) {
    const double a = part_of(d, p, "a_ms"), b = part_of(d, p, "b_ms");
    if (std::max(a, b) >= 0.005 * top) {
      rows.push_back(p);
      widest = std::max({widest, a, b});
    }
  }
  if (rows.empty()) return;
  const int rh = 22;
  const double plot = kDiffW - kDiffLabelW - kDiffTextW;
  o << "<svg class=diffparts width=" << kDiffW << " height=" << int(rows.size()) * rh + 4 << " role=img><title>each "
    << "part before and after (ms per steady step)</title>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t p = rows[i];
    const double a = part_of(d, p, "a_ms"), b = part_of(d, p, "b_ms");
    const int y = int(i) * rh;
    o << "<g><title>" << html::esc(part_label(Part(p))) << html::num(": %.2f", a) << html::num(" -> %.2f ms", b)
      << "</title><text x=0 y=" << y + 15 << " class=lane>" << html::esc(part_label(Part(p))) << "</text><rect class=before x="
      << kDiffLabelW << " y=" << y + 2 << " width=" << html::num("%.1f", std::max(a / widest * plot, 0.5))
      << " height=8 fill='" << html::kColors[p] << "'/><rect x=" << kDiffLabelW << " y=" << y + 11 << " width="
      << html::num("%.1f", std::max(b / widest * plot, 0.5)) << " height=8 fill='" << html::kColors[p] << "'/><text x="
      << html::num("%.0f", kDiffLabelW + plot + 8) << " y=" << y + 15 << " class=ax>" << signed_ms(a) << " &#8594; "
      << signed_ms(b) << " ms (" << (b - a >= 0.005 ? "+" : "") << signed_ms(b - a) << ")</text></g>\n";
  }
  o << "</svg><p class=note>Faded: before; solid: after. Mean ms per steady step.</p>\n";
}

// Each remedy of the run before: the gain it predicted (dashed outline) and
// the gain measured (solid; red where the step got slower).
void remedy_rows(std::ostream& o, const json& d) {
  const auto& rem = d["remedies"];
  if (rem.empty()) return;
  double top = 1e-9;
  for (const auto& m : rem)
    top = std::max({top, std::abs(m["predicted_gain_ms"].get<double>()), std::abs(m["actual_gain_ms"].get<double>())});
  const int rh = 40;
  const double plot = kDiffW - kDiffLabelW - kDiffTextW;
  o << "<svg class=diffremedies width=" << kDiffW << " height=" << int(rem.size()) * rh + 4 << " role=img><title>each "
    << "remedy's predicted gain against the measured one</title>\n";
  int i = 0;
  for (const auto& m : rem) {
    const double pred = m["predicted_gain_ms"].get<double>(), act = m["actual_gain_ms"].get<double>();
    const std::string name = m.value("title", "").empty() ? m["id"].get<std::string>() : m["title"].get<std::string>();
    const std::string verdict = m["verdict"].get<std::string>();
    const int y = i++ * rh;
    o << "<g><title>" << html::esc(name) << ": predicted " << (m["bound"].get<bool>() ? "at most " : "")
      << signed_ms(pred) << " ms, measured " << signed_ms(act) << " ms: " << html::esc(verdict) << "</title><text x=0 y="
      << y + 12 << " class=lane>" << html::esc(name) << "</text><text x=0 y=" << y + 30 << ">gain</text>"
      << "<rect class=predicted x=" << kDiffLabelW << " y=" << y + 17 << " width="
      << html::num("%.1f", std::max(std::abs(pred) / top * plot, 0.5)) << " height=20 />";
    // A remedy not applied between the runs is not credited with the change.
    if (verdict != "not applied")
      o << "<rect class=" << (act < 0 ? "worse" : "measured") << " x=" << kDiffLabelW << " y=" << y + 21
        << " width=" << html::num("%.1f", std::max(std::abs(act) / top * plot, 0.5)) << " height=12 />";
    o << "<text x=" << html::num("%.0f", kDiffLabelW + plot + 8) << " y=" << y + 31 << " class=ax>" << signed_ms(pred)
      << " predicted, " << signed_ms(act) << " ms measured: " << html::esc(verdict) << "</text></g>\n";
  }
  o << "</svg><p class=note>Dashed: the gain the report before predicted; solid: the gain measured (red: slower).</p>\n";
}

}  // namespace

void write_diff_html(std::ostream& o, const std::string& title, const std::vector<std::vector<std::string>>& table,
                     const std::vector<DiffSection>& sections) {
  o << "<!doctype html><html><head><meta charset=utf-8><title>" << html::esc(title) << "</title><style>"
    << html::kStyle << "</style></head><body><h1>" << html::esc(title) << "</h1>\n";
  if (!table.empty()) {
    o << "<table>";
    for (size_t i = 0; i < table.size(); ++i) {
      o << "<tr>";
      for (const auto& c : table[i]) o << (i == 0 ? "<th>" : "<td>") << html::esc(c) << (i == 0 ? "</th>" : "</td>");
      o << "</tr>\n";
    }
    o << "</table>\n";
  }
  for (const DiffSection& s : sections) {
    o << "<section><h2>" << html::esc(s.heading) << "</h2>\n";
    if (!s.note.empty()) o << "<p>" << html::esc(s.note) << "</p>\n";
    if (s.a != nullptr && s.b != nullptr) {
      size_t shown = 0, ranks = 0;
      for (const auto& ra : s.a->ranks) {
        const RankReport* rb = match(*s.b, ra.rank);
        if (rb == nullptr) continue;
        ++ranks;
        if (shown >= kDiffRanks) continue;
        ++shown;
        const json d = rank_diff(ra, *rb, s.opt);
        const double a = d["a_step_ms"].get<double>(), b = d["b_step_ms"].get<double>();
        o << "<h3>" << (ra.rank >= 0 ? "rank " + std::to_string(ra.rank) + ": " : std::string()) << "step "
          << html::num("%.2f ms", a) << " &#8594; " << html::num("%.2f ms", b) << " ("
          << (a > 0 ? html::num("%+.1f %%", (b - a) / a * 100) : std::string("?")) << ")</h3>\n";
        step_bars(o, d);
        part_rows(o, d);
        remedy_rows(o, d);
      }
      if (ranks == 0) o << "<p>no rank to compare</p>\n";
      if (ranks > shown) o << "<p>" << ranks - shown << " more ranks not shown (see diff --json)</p>\n";
    }
    o << "</section>\n";
  }
  o << "</body></html>\n";
}

}  // namespace stallscope::analyzer
