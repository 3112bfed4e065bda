#include "stallscope/analyzer/expect.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "capacity.hpp"  // mean_part_ms
#include "stallscope/analyzer/parts.hpp"

namespace stallscope::analyzer {

namespace {

// Part groups by their short names (part_group's words).
struct Group {
  const char* name;
  const char* group;
};
constexpr Group kGroups[] = {
    {"data_stall", "data stall"}, {"host", "host"}, {"comm", "communication"}, {"copies", "copies"}};

bool is_part(const std::string& m) {
  for (size_t p = 0; p < kPartCount; ++p)
    if (part_key(Part(p)) == m) return true;
  return false;
}

bool is_group(const std::string& m) {
  for (const auto& g : kGroups)
    if (m == g.name) return true;
  return false;
}

std::string known_metrics() {
  std::string s = "data_stall, host, comm, copies";
  for (size_t p = 0; p < kPartCount; ++p) s += ", " + std::string(part_key(Part(p)));
  return s + ", step, step_p50, step_p90, top_gain";
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

const char* op_text(Expectation::Op op) {
  switch (op) {
    case Expectation::Op::kLess: return "<";
    case Expectation::Op::kLessEqual: return "<=";
    case Expectation::Op::kGreater: return ">";
    case Expectation::Op::kGreaterEqual: return ">=";
  }
  return "?";
}

bool holds(Expectation::Op op, double x, double v) {
  switch (op) {
    case Expectation::Op::kLess: return x < v;
    case Expectation::Op::kLessEqual: return x <= v;
    case Expectation::Op::kGreater: return x > v;
    case Expectation::Op::kGreaterEqual: return x >= v;
  }
  return false;
}

// The metric's value on one rank, in the expectation's unit; NaN with *why.
double measure(const RankReport& r, const Expectation& e, std::string* why) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (r.steady_steps == 0) {
    *why = "no steady steps";
    return kNaN;
  }
  if (e.metric == "step_p50") return r.step_p50_ms;
  if (e.metric == "step_p90") return r.step_p90_ms;
  if (e.metric == "top_gain") {
    const double gain = r.remedies.empty() ? 0.0 : std::max(0.0, r.remedies.front().gain_ms());
    return e.percent ? (r.remedies.empty() ? 0.0 : 100 * gain / r.remedies.front().step_ms) : gain;
  }
  double share = 0, ms = 0;
  for (size_t p = 0; p < kPartCount; ++p) {
    const std::string key(part_key(Part(p)));
    bool in = key == e.metric;
    for (const auto& g : kGroups)
      in = in || (e.metric == g.name && part_group(Part(p)) == g.group);
    if (!in) continue;
    share += r.parts[p].share;
    ms += mean_part_ms(r, Part(p));
  }
  return e.percent ? 100 * share : ms;
}

}  // namespace

bool parse_expectation(const std::string& text, Expectation& out, std::string* error) {
  out = Expectation{};
  out.text = trim(text);
  const std::string quoted = "--expect '" + out.text + "': ";
  const size_t at = out.text.find_first_of("<>");
  if (at == std::string::npos || at == 0) {
    *error = quoted + "not METRIC OP VALUE (OP one of <, <=, >, >=; e.g. 'data_stall<5%')";
    return false;
  }
  const bool eq = at + 1 < out.text.size() && out.text[at + 1] == '=';
  out.op = out.text[at] == '<' ? (eq ? Expectation::Op::kLessEqual : Expectation::Op::kLess)
                               : (eq ? Expectation::Op::kGreaterEqual : Expectation::Op::kGreater);
  std::string metric = trim(out.text.substr(0, at));
  std::string rest = trim(out.text.substr(at + (eq ? 2 : 1)));
  if (metric == "step") metric = "step_p50";
  if (!is_part(metric) && !is_group(metric) && metric != "step_p50" && metric != "step_p90" &&
      metric != "top_gain") {
    *error = quoted + "unknown metric '" + metric + "' (known: " + known_metrics() + ")";
    return false;
  }
  out.metric = metric;
  if (rest.size() >= 1 && rest.back() == '%') {
    out.percent = true;
    rest = trim(rest.substr(0, rest.size() - 1));
  } else if (rest.size() >= 2 && rest.compare(rest.size() - 2, 2, "ms") == 0) {
    rest = trim(rest.substr(0, rest.size() - 2));
  } else {
    *error = quoted + "the value needs a unit: % (of the step) or ms";
    return false;
  }
  char* end = nullptr;
  const double v = rest.empty() ? 0 : std::strtod(rest.c_str(), &end);
  if (rest.empty() || end == nullptr || *end != '\0' || !std::isfinite(v) || v < 0 ||
      std::isdigit(static_cast<unsigned char>(rest[0])) == 0) {
    *error = quoted + "'" + rest + "' is not a number of 0 or more";
    return false;
  }
  if (out.percent && v > 100) {
    *error = quoted + "a share is at most 100 %";
    return false;
  }
  if (out.percent && metric.rfind("step_p", 0) == 0) {
    *error = quoted + "a step is given in ms, not %";
    return false;
  }
  out.value = v;
  return true;
}

std::vector<ExpectationResult> check_expectations(const Report& rep,
                                                  const std::vector<Expectation>& expected) {
  std::vector<ExpectationResult> out;
  for (const auto& r : rep.ranks)
    for (const auto& e : expected) {
      ExpectationResult x;
      x.expectation = &e;
      x.rank = r.rank;
      std::string why;
      x.measured = measure(r, e, &why);
      const std::string who = rep.ranks.size() > 1 || r.rank >= 0
                                  ? "rank " + std::to_string(r.rank) + ": " : "";
      char buf[256];
      if (std::isnan(x.measured)) {
        std::snprintf(buf, sizeof buf, "%s%s not measurable (%s)", who.c_str(), e.metric.c_str(),
                      why.c_str());
      } else {
        x.met = holds(e.op, x.measured, e.value);
        std::snprintf(buf, sizeof buf, "%s%s %.2f %s (expected %s %g %s)", who.c_str(),
                      e.metric.c_str(), x.measured, e.percent ? "%" : "ms", op_text(e.op), e.value,
                      e.percent ? "%" : "ms");
      }
      x.what = buf;
      out.push_back(std::move(x));
    }
  return out;
}

}  // namespace stallscope::analyzer
