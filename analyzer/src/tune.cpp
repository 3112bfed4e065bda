// The search behind `stallscope tune` (tune.hpp): a greedy walk along the
// reports' own top remedies, judged against the run-to-run noise.
#include "stallscope/analyzer/tune.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "stallscope/internal/bounded_json.hpp"

namespace stallscope::analyzer::tune {

namespace {

using nlohmann::json;

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * double(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

std::string key_of(const std::string& item) { return item.substr(0, item.find('=')); }

// A set of settings, order-free: the same settings are never tried twice.
std::string signature(std::vector<std::string> s) {
  std::sort(s.begin(), s.end());
  std::string out;
  for (const auto& x : s) out.append(x).push_back('\n');
  return out;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out.append(out.empty() ? "" : " ").append("--set ").append(x);
  return out.empty() ? "(as is)" : out;
}

// "delivered 93 % of the predicted 12.10 ms", or not, for people and tables:
// mean steps on both sides, as the remedies predict.
std::string delivery(const Trial& t, double based_on_mean_ms, double gain_pred, const Options& o) {
  const double gain = based_on_mean_ms - t.mean_ms;
  if (gain_pred <= 0) return "";
  const double share = gain / gain_pred;
  const std::string of = fmt(t.bound ? "of at most %.2f ms" : "of the predicted %.2f ms", gain_pred);
  const std::string pct = fmt("%.0f %% ", 100 * share);
  if (t.outcome == Outcome::kWorse || gain <= t.noise_ms) return "not delivered (" + pct + of + ")";
  if (t.bound) return "delivered (" + pct + of + ")";
  if (share >= 1 - o.tolerance) return "delivered (" + pct + of + ")";
  return "partly delivered (" + pct + of + ")";
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kBaseline: return "baseline";
    case Outcome::kBetter: return "better";
    case Outcome::kWithinNoise: return "within noise";
    case Outcome::kWorse: return "worse";
    case Outcome::kFailed: return "setting failed";
  }
  return "?";
}

void measure_steps(std::vector<double> steps_ms, Measurement* m) {
  std::sort(steps_ms.begin(), steps_ms.end());
  m->steps = steps_ms.size();
  if (steps_ms.empty()) return;
  m->p50_ms = quantile(steps_ms, 0.5);
  double sum = 0;
  for (double v : steps_ms) sum += v;
  m->mean_ms = sum / double(steps_ms.size());
  m->spread_ms = quantile(steps_ms, 0.9) - quantile(steps_ms, 0.1);
  // A robust sigma (the interquartile range of a normal spread), and the
  // median's standard error (1.2533 sigma / sqrt n).
  const double sigma = (quantile(steps_ms, 0.75) - quantile(steps_ms, 0.25)) / 1.349;
  m->se_ms = 1.2533 * sigma / std::sqrt(double(steps_ms.size()));
}

std::vector<std::string> merge_settings(const std::vector<std::string>& base,
                                        const std::vector<std::string>& add) {
  std::vector<std::string> out = base;
  for (const auto& a : add) {
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const std::string& b) { return key_of(b) == key_of(a); });
    if (same != out.end()) *same = a;
    else out.push_back(a);
  }
  return out;
}

bool measurement_from_report(const std::string& text, Measurement* out, std::string* error) {
  constexpr size_t kAny = std::numeric_limits<size_t>::max();
  std::string why;
  const json j = detail::parse_bounded_json(text, &why, {kAny, detail::kMaxJsonDepth, kAny});
  if (j.is_discarded() || !j.is_object() || j.value("schema", "") != "stallscope.report") {
    *error = "not a stallscope report" + (why.empty() ? std::string() : ": the document " + why);
    return false;
  }
  try {
    const json& ranks = j.at("ranks");
    if (!ranks.is_array() || ranks.empty()) {
      *error = "the report has no rank";
      return false;
    }
    // Rank 0's (a launcher's job: the rank tune measures), else the first.
    const json* pick = &ranks.at(0);
    for (const auto& x : ranks)
      if (x.value("rank", -1) == 0) pick = &x;
    const json& r = *pick;
    Measurement m;
    m.summary = r.value("summary", "");
    std::vector<double> steps;
    double sum = 0;
    size_t all = 0;
    for (const auto& s : r.at("step_table")) {
      if (s.value("warmup", false)) continue;
      const double ms = s.at("wall_ns").get<double>() / 1e6;
      sum += ms;
      ++all;
      if (!s.value("outlier", false)) steps.push_back(ms);
    }
    measure_steps(steps, &m);
    if (all > 0) m.mean_ms = sum / double(all);  // outliers in: the remedies' step
    if (m.steps == 0) {
      *error = "the report has no steady step";
      return false;
    }
    m.p50_ms = r.at("steps").at("p50_ms").get<double>();
    bool first = true;
    for (const auto& x : r.at("remedies")) {
      Candidate c;
      c.id = x.value("id", "");
      c.title = x.value("title", "");
      c.step_ms = x.value("step_ms", 0.0);
      c.predicted_step_ms = x.value("predicted_step_ms", 0.0);
      c.bound = x.value("bound", false);
      c.edit = x.value("pytorch_knob", "");
      if (c.edit.empty()) c.edit = x.value("loader_knob", "");
      if (first) {
        m.top_gain_ms = c.gain_ms();
        m.top_title = c.title;
        first = false;
      }
      // The settings as the report lists them ("set"): its "try" is text for people.
      if (const auto set = x.find("set"); set != x.end() && set->is_array())
        for (const auto& item : *set)
          if (item.is_string()) c.sets.push_back(item.get<std::string>());
      if (!c.sets.empty()) m.remedies.push_back(std::move(c));
    }
    m.ok = true;
    *out = std::move(m);
  } catch (const json::exception& e) {
    *error = std::string("bad report field: ") + e.what();
    return false;
  }
  return true;
}

double noise_ms(const Measurement& a, const Measurement& b, const Options& o) {
  const double floor = o.noise_floor_share * std::min(a.p50_ms, b.p50_ms);
  return std::max(floor, o.noise_sigmas * std::sqrt(a.se_ms * a.se_ms + b.se_ms * b.se_ms));
}

namespace {

// The untried candidate of `cur`'s report with the largest predicted gain
// (the ceiling caps what an input remedy can promise); none (c null) when
// each was tried or adds a setting that failed.
struct Pick {
  const Candidate* c = nullptr;
  double pred = 0, gain = -1;
  std::vector<std::string> settings;  // cur's with the candidate's merged in
};
Pick pick_next(const Trial& cur, const Options& o, const std::set<std::string>& tried,
               const std::set<std::string>& failed) {
  Pick p;
  for (const auto& c : cur.m.remedies) {
    std::vector<std::string> s = merge_settings(cur.settings, c.sets);
    if (tried.contains(signature(s))) continue;
    if (std::any_of(c.sets.begin(), c.sets.end(), [&](const std::string& x) { return failed.contains(x); }))
      continue;
    const double pred = o.ceiling_ms > 0 ? std::max(c.predicted_step_ms, o.ceiling_ms) : c.predicted_step_ms;
    const double gain = c.step_ms - pred;
    if (gain > p.gain) p = {&c, pred, gain, std::move(s)};
  }
  return p;
}

// Why the search stops when no candidate is left.
std::string nothing_left(const Trial& cur, const Options& o) {
  if (cur.m.top_gain_ms >= o.min_gain_share * cur.p50_ms && !cur.m.top_title.empty())
    return "no setting left to try: the top remedy (" + cur.m.top_title + ") needs a change to the program";
  return cur.m.remedies.empty() ? "the report proposes no setting to try"
                                : "every setting the report proposes was tried";
}

// Trial number `index`: `p`'s settings on top of trial `current` (`cur`).
Trial next_trial(const Pick& p, int index, int current, const Trial& cur) {
  Trial t;
  t.index = index;
  t.settings = p.settings;
  t.added = p.c->sets;
  t.remedy_id = p.c->id;
  t.remedy_title = p.c->title;
  t.edit = p.c->edit;
  t.based_on = current;
  t.based_on_ms = cur.p50_ms;
  t.predicted_ms = p.pred;
  t.bound = p.c->bound;
  return t;
}

// Trial 0, the job as it is (or with the initial settings), into `r`;
// false when it failed (the search stops there).
template <class Say>
bool run_baseline(const Options& o, const Runner& run, const Say& say, Result& r) {
  Trial base;
  base.settings = o.initial;
  say("trial 0 (the job " + std::string(o.initial.empty() ? "as is" : "with its settings") + "): running");
  base.m = run({0, 0, o.initial, ""});
  if (!base.m.ok) {
    base.outcome = Outcome::kFailed;
    r.trials.push_back(base);
    r.stop_reason = "the first run failed: " + base.m.failure;
    return false;
  }
  base.run_p50s = {base.m.p50_ms};
  base.p50_ms = base.m.p50_ms;
  base.mean_ms = base.m.mean_ms;
  say(fmt("trial 0: step p50 %.2f ms (p90-p10 %.2f ms)", base.p50_ms, base.m.spread_ms));
  r.trials.push_back(base);
  r.best = 0;
  return true;
}

Outcome judge(const Trial& t, const Trial& cur) {
  const double delta = t.p50_ms - cur.p50_ms;
  return delta > t.noise_ms ? Outcome::kWorse : delta < -t.noise_ms ? Outcome::kBetter : Outcome::kWithinNoise;
}

// Runs trial `t` and judges it against `cur`: once more, judged on the
// mean of both, when the first run is within the noise and a run is left.
// False when a run failed (t.outcome kFailed).
template <class Say>
bool measure_trial(Trial& t, const Trial& cur, const Options& o, const Runner& run, const Say& say, Result& r) {
  t.m = run({t.index, 0, t.settings, t.remedy_id});
  ++r.runs;
  if (!t.m.ok) {
    t.outcome = Outcome::kFailed;
    say("trial " + std::to_string(t.index) + ": setting failed: " + t.m.failure);
    return false;
  }
  t.run_p50s = {t.m.p50_ms};
  t.p50_ms = t.m.p50_ms;
  t.mean_ms = t.m.mean_ms;
  t.noise_ms = noise_ms(cur.m, t.m, o);
  t.outcome = judge(t, cur);
  if (t.outcome != Outcome::kWithinNoise || !o.repeat_in_doubt || r.runs >= o.trials) return true;
  say("trial " + std::to_string(t.index) +
      fmt(": %.2f ms, within the noise (%.2f ms) of %.2f ms: once more", t.p50_ms, t.noise_ms, cur.p50_ms));
  const Measurement again = run({t.index, 1, t.settings, t.remedy_id});
  ++r.runs;
  if (!again.ok) {
    t.outcome = Outcome::kFailed;
    t.m = again;
    say("trial " + std::to_string(t.index) + ": setting failed on the repeat: " + again.failure);
    return false;
  }
  t.run_p50s.push_back(again.p50_ms);
  t.p50_ms = (t.run_p50s[0] + t.run_p50s[1]) / 2;
  t.mean_ms = (t.mean_ms + again.mean_ms) / 2;
  t.m = again;
  t.outcome = judge(t, cur);
  return true;
}

}  // namespace

Result search(const Options& o, const Runner& run,
              const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  Result r;
  if (!run_baseline(o, run, say, r)) return r;
  int current = 0;
  std::set<std::string> tried{signature(o.initial)};
  std::set<std::string> failed;  // the items a failed trial added: never tried again

  for (;;) {
    const Trial cur = r.trials[size_t(current)];
    if (o.ceiling_ms > 0 && cur.p50_ms <= o.ceiling_ms * (1 + o.min_gain_share)) {
      r.stop_reason = fmt("the step (%.2f ms) is within %.0f %% of the measured ceiling", cur.p50_ms,
                          100 * o.min_gain_share) +
                      fmt(" (%.2f ms, data for free): no input setting can gain more", o.ceiling_ms);
      break;
    }
    const Pick next = pick_next(cur, o, tried, failed);
    if (next.c == nullptr) {
      r.stop_reason = nothing_left(cur, o);
      break;
    }
    const Candidate* pick = next.c;
    const double pick_pred = next.pred, pick_gain = next.gain;
    const std::vector<std::string>& pick_settings = next.settings;
    const double step_ref = pick->step_ms > 0 ? pick->step_ms : cur.p50_ms;
    if (pick_gain < o.min_gain_share * step_ref) {
      r.stop_reason = "the best predicted gain left (" + pick->title + ", " +
                      fmt("%.2f ms) is %.1f %% of the step, below %.0f %%", pick_gain,
                          100 * pick_gain / step_ref, 100 * o.min_gain_share);
      break;
    }
    if (r.runs >= o.trials) {
      r.stop_reason = std::to_string(o.trials) + " trial(s) spent";
      break;
    }
    tried.insert(signature(pick_settings));
    Trial t = next_trial(next, int(r.trials.size()), current, cur);
    say("trial " + std::to_string(t.index) + ": " + pick->title + ", " + joined(t.added) +
        fmt(" (predicted %.2f ms): running", pick_pred));
    if (!measure_trial(t, cur, o, run, say, r)) {
      failed.insert(t.added.begin(), t.added.end());
      r.trials.push_back(t);
      continue;  // not followed: the next candidate of the same report
    }
    t.delivered = delivery(t, cur.mean_ms, pick->step_ms - pick_pred, o);
    say("trial " + std::to_string(t.index) + fmt(": step p50 %.2f ms (was %.2f ms): ", t.p50_ms,
                                                 cur.p50_ms) +
        outcome_name(t.outcome) + (t.delivered.empty() ? "" : ", " + t.delivered));
    r.trials.push_back(t);
    if (t.outcome == Outcome::kWorse) {
      r.stop_reason = "trial " + std::to_string(t.index) + " was worse than trial " +
                      std::to_string(current) + " beyond the run-to-run noise" +
                      fmt(" (%+.2f ms against %.2f ms)", t.p50_ms - cur.p50_ms, t.noise_ms);
      break;
    }
    if (t.p50_ms < r.trials[size_t(r.best)].p50_ms && t.outcome == Outcome::kBetter) r.best = t.index;
    if (t.outcome == Outcome::kBetter || t.p50_ms <= cur.p50_ms) current = t.index;
  }
  return r;
}

}  // namespace stallscope::analyzer::tune
