// `stallscope diff`: per-part deltas between two runs, and whether the gain
// run A's report predicted for each remedy shows up in run B.
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

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
    rem.push_back({{"id", m.id}, {"predicted_gain_ms", m.gain_ms()}, {"actual_gain_ms", gain},
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

}  // namespace stallscope::analyzer
