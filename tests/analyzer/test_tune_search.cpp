// The search and stop logic of `stallscope tune` (analyzer/tune.hpp) against
// a simulated job: a trainer whose step time is a known function of its
// settings, with deterministic noise, whose "report" proposes remedies the
// way the analyzer does. No process is started.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "stallscope/analyzer/report.hpp"
#include "stallscope/analyzer/tune.hpp"

namespace tune = stallscope::analyzer::tune;

namespace {

const std::string kWorkers = "dataloader[train.py:40].num_workers";
const std::string kPrefetch = "dataloader[train.py:40].prefetch_factor";
const std::string kPin = "dataloader[train.py:40].pin_memory";

std::map<std::string, std::string> as_map(const std::vector<std::string>& s) {
  std::map<std::string, std::string> m;
  for (const auto& x : s) m[x.substr(0, x.find('='))] = x.substr(x.find('=') + 1);
  return m;
}

// A data-bound job: each batch costs `decode_ms` of CPU on one of `cores`,
// the step computes `compute_ms`; workers beyond the cores bring nothing.
// Its report proposes enough workers for the decode to hide (capped at the
// cores, as the analyzer's capacity model does), and `extra` remedies.
struct SimJob {
  double compute_ms = 10, decode_ms = 40;
  int cores = 4;
  double noise_share = 0.01;   // per-step jitter, uniform +-
  double run_offset = 0;       // a run-to-run shift (ms), added to every step
  int crash_workers = -1;      // a num_workers that crashes the job (a Bus error)
  double pin_effect_ms = 0;    // what pin_memory=true does to the step
  bool propose_pin = false;    // the report proposes pin_memory
  double pin_predicted_gain_ms = 2;
  bool overpromise_workers = false;  // propose 2x the workers that help
  int runs = 0;
  uint64_t seed = 12345;

  double step(const std::vector<std::string>& settings) const {
    auto m = as_map(settings);
    const int w = m.count(kWorkers) ? std::stoi(m[kWorkers]) : 0;
    const int eff = std::min(std::max(w, 1), cores);
    const double feed = w == 0 ? decode_ms : decode_ms / eff;
    double s = w == 0 ? compute_ms + decode_ms : std::max(compute_ms, feed);
    if (m.count(kPin) && m[kPin] == "true") s += pin_effect_ms;
    return s;
  }

  double jitter() {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double((seed >> 33) % 10000) / 10000.0 - 0.5) * 2;  // [-1, 1)
  }

  tune::Measurement operator()(const tune::Request& q) {
    ++runs;
    tune::Measurement m;
    auto s = as_map(q.settings);
    const int w = s.count(kWorkers) ? std::stoi(s[kWorkers]) : 0;
    if (crash_workers >= 0 && w == crash_workers) {
      m.failure = "exit status 135 (killed by SIGBUS) before the window closed";
      return m;
    }
    const double base = step(q.settings) + (q.attempt ? run_offset : 0);
    std::vector<double> steps;
    for (int i = 0; i < 40; ++i) steps.push_back(base * (1 + noise_share * jitter()));
    tune::measure_steps(steps, &m);
    m.ok = true;
    const double cur = m.p50_ms;
    // more workers: enough for the decode to hide under the compute.
    const int want = std::min(cores, int(std::ceil(decode_ms / compute_ms)));
    const int propose = overpromise_workers ? 2 * want : want;
    if (w < propose) {
      tune::Candidate c;
      c.id = "more_workers";
      c.title = "more workers";
      c.sets = {kWorkers + "=" + std::to_string(propose)};
      c.edit = "DataLoader(..., num_workers=" + std::to_string(propose) + ") at train.py:40";
      c.step_ms = cur;
      c.predicted_step_ms = std::max(compute_ms, decode_ms / propose);
      m.remedies.push_back(c);
    }
    if (propose_pin && !(s.count(kPin) && s[kPin] == "true")) {
      tune::Candidate c;
      c.id = "pinned_memory";
      c.title = "pinned memory";
      c.sets = {kPin + "=true"};
      c.step_ms = cur;
      c.predicted_step_ms = cur - pin_predicted_gain_ms;
      m.remedies.push_back(c);
    }
    if (!m.remedies.empty()) {
      m.top_gain_ms = m.remedies.front().gain_ms();
      m.top_title = m.remedies.front().title;
    }
    return m;
  }
};

tune::Result run_search(SimJob& job, tune::Options o = {}) {
  return tune::search(o, [&](const tune::Request& q) { return job(q); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tune_search)

BOOST_AUTO_TEST_CASE(data_bound_job_reaches_the_compute_and_stops) {
  SimJob job;  // 50 ms as is (decode on the trainer), 10 ms with 4 workers
  const tune::Result r = run_search(job);
  BOOST_REQUIRE_EQUAL(r.trials.size(), 2u);
  BOOST_CHECK(r.trials[0].outcome == tune::Outcome::kBaseline);
  BOOST_CHECK_CLOSE(r.trials[0].p50_ms, 50, 2);
  const tune::Trial& t = r.trials[1];
  BOOST_CHECK(t.outcome == tune::Outcome::kBetter);
  BOOST_CHECK_EQUAL(t.remedy_id, "more_workers");
  BOOST_REQUIRE_EQUAL(t.settings.size(), 1u);
  BOOST_CHECK_EQUAL(t.settings[0], kWorkers + "=4");
  BOOST_CHECK_CLOSE(t.p50_ms, 10, 3);
  BOOST_CHECK_CLOSE(t.predicted_ms, 10, 0.1);
  BOOST_CHECK(t.delivered.starts_with("delivered"));
  BOOST_CHECK_EQUAL(r.best, 1);
  BOOST_CHECK_EQUAL(r.runs, 1);
  // Nothing left: the second report proposes no setting.
  BOOST_CHECK_EQUAL(r.stop_reason, "the report proposes no setting to try");
}

BOOST_AUTO_TEST_CASE(compute_bound_job_stops_at_once) {
  SimJob job;
  job.decode_ms = 2;  // 4 workers' worth already hidden: no remedy
  tune::Options o;
  o.initial = {kWorkers + "=4"};
  const tune::Result r = run_search(job, o);
  BOOST_CHECK_EQUAL(r.trials.size(), 1u);
  BOOST_CHECK_EQUAL(r.runs, 0);
  BOOST_CHECK_EQUAL(job.runs, 1);
  BOOST_CHECK_EQUAL(r.best, 0);
  BOOST_CHECK_EQUAL(r.stop_reason, "the report proposes no setting to try");
}

BOOST_AUTO_TEST_CASE(small_predicted_gain_stops_before_running) {
  SimJob job;
  job.decode_ms = 10.3;  // 1 worker: 10.3 ms against 10 ms compute, 3 %
  tune::Options o;
  o.initial = {kWorkers + "=1"};
  const tune::Result r = run_search(job, o);
  BOOST_CHECK_EQUAL(r.trials.size(), 1u);
  BOOST_CHECK_EQUAL(job.runs, 1);
  BOOST_CHECK(r.stop_reason.starts_with("the best predicted gain left (more workers"));
  BOOST_CHECK(r.stop_reason.find("below 5 %") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_setting_that_crashes_is_recorded_and_not_followed) {
  SimJob job;
  job.overpromise_workers = true;  // proposes 8, which crashes
  job.crash_workers = 8;
  job.propose_pin = true;          // the report's other setting
  job.pin_effect_ms = -5;          // which helps: 50 -> 45
  job.pin_predicted_gain_ms = 5;
  const tune::Result r = run_search(job);
  BOOST_REQUIRE_GE(r.trials.size(), 3u);
  BOOST_CHECK(r.trials[1].outcome == tune::Outcome::kFailed);
  BOOST_CHECK(r.trials[1].m.failure.find("SIGBUS") != std::string::npos);
  BOOST_CHECK_EQUAL(r.trials[1].settings[0], kWorkers + "=8");
  // The next candidate of the same (baseline) report, not the failed one's.
  BOOST_CHECK_EQUAL(r.trials[2].based_on, 0);
  BOOST_CHECK_EQUAL(r.trials[2].remedy_id, "pinned_memory");
  BOOST_CHECK(r.trials[2].outcome == tune::Outcome::kBetter);
  for (const auto& t : r.trials)
    if (t.index > 1) BOOST_CHECK(as_map(t.settings)[kWorkers] != "8");
  BOOST_CHECK(r.trials[size_t(r.best)].outcome != tune::Outcome::kFailed);
}

BOOST_AUTO_TEST_CASE(a_trial_worse_beyond_the_noise_stops_the_search) {
  SimJob job;
  job.decode_ms = 2;
  job.propose_pin = true;
  job.pin_effect_ms = 4;  // predicted -2 ms, delivers +4 ms (40 %)
  tune::Options o;
  o.initial = {kWorkers + "=4"};
  o.min_gain_share = 0.05;
  job.compute_ms = 10;
  // 2 ms of a 10 ms step is 20 %: proposed.
  const tune::Result r = run_search(job, o);
  BOOST_REQUIRE_EQUAL(r.trials.size(), 2u);
  BOOST_CHECK(r.trials[1].outcome == tune::Outcome::kWorse);
  BOOST_CHECK(r.trials[1].delivered.starts_with("not delivered"));
  BOOST_CHECK_EQUAL(r.best, 0);
  BOOST_CHECK(r.stop_reason.find("worse than trial 0 beyond the run-to-run noise") !=
              std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_trial_within_the_noise_runs_once_more) {
  SimJob job;
  job.decode_ms = 2;
  job.noise_share = 0.3;  // +-30 % per step
  job.propose_pin = true;
  job.pin_effect_ms = 0;  // does nothing
  tune::Options o;
  o.initial = {kWorkers + "=4"};
  const tune::Result r = run_search(job, o);
  BOOST_REQUIRE_GE(r.trials.size(), 2u);
  const tune::Trial& t = r.trials[1];
  BOOST_CHECK_EQUAL(t.run_p50s.size(), 2u);
  BOOST_CHECK_EQUAL(r.runs, 2);
  BOOST_CHECK(t.outcome == tune::Outcome::kWithinNoise);
  BOOST_CHECK_GT(t.noise_ms, 0.2);  // from the steps' spread, above the 2 % floor
  BOOST_CHECK_EQUAL(r.best, 0);     // no measured gain: the baseline stays best
}

BOOST_AUTO_TEST_CASE(the_run_to_run_shift_beyond_the_noise_counts_as_worse) {
  SimJob job;
  job.decode_ms = 2;
  job.noise_share = 0.01;
  job.propose_pin = true;
  job.pin_effect_ms = 0.1;   // first run: within the noise (2 % floor of 10 ms)
  job.run_offset = 3;        // the repeat is 3 ms slower
  tune::Options o;
  o.initial = {kWorkers + "=4"};
  const tune::Result r = run_search(job, o);
  BOOST_REQUIRE_EQUAL(r.trials.size(), 2u);
  BOOST_CHECK_EQUAL(r.trials[1].run_p50s.size(), 2u);
  // Mean of 10.1 and 13.1 against 10.0: +1.6 ms, beyond a noise of ~0.2 ms.
  BOOST_CHECK(r.trials[1].outcome == tune::Outcome::kWorse);
}

BOOST_AUTO_TEST_CASE(the_trial_budget_is_kept) {
  SimJob job;
  job.propose_pin = true;
  job.pin_effect_ms = -1;
  tune::Options o;
  o.trials = 1;
  const tune::Result r = run_search(job, o);
  BOOST_CHECK_EQUAL(r.runs, 1);
  BOOST_CHECK_EQUAL(job.runs, 2);
  BOOST_CHECK_EQUAL(r.stop_reason, "1 trial(s) spent");
}

BOOST_AUTO_TEST_CASE(the_measured_ceiling_caps_predictions_and_stops) {
  SimJob job;  // 50 ms, 10 ms with 4 workers
  tune::Options o;
  o.ceiling_ms = 9.8;
  const tune::Result r = run_search(job, o);
  BOOST_REQUIRE_EQUAL(r.trials.size(), 2u);
  BOOST_CHECK(r.stop_reason.find("within 5 % of the measured ceiling") != std::string::npos);
  // A ceiling above a remedy's prediction caps it.
  SimJob job2;
  tune::Options o2;
  o2.ceiling_ms = 20;
  const tune::Result r2 = run_search(job2, o2);
  BOOST_REQUIRE_GE(r2.trials.size(), 2u);
  BOOST_CHECK_CLOSE(r2.trials[1].predicted_ms, 20, 0.1);
}

BOOST_AUTO_TEST_CASE(the_baseline_failing_is_reported) {
  SimJob job;
  job.crash_workers = 0;
  const tune::Result r = run_search(job);
  BOOST_CHECK_EQUAL(r.best, -1);
  BOOST_CHECK(r.stop_reason.starts_with("the first run failed: exit status 135"));
}

// The settings are typed; the command line is only ever rendered from them.
BOOST_AUTO_TEST_CASE(settings_render_a_quoted_try_command_and_merge) {
  namespace a = stallscope::analyzer;
  const std::vector<a::Setting> s = {{"dataloader[train.py:42]", "num_workers", "4"},
                                     {"loader", "workers", "2"},
                                     {"dataloader[it's.py:1]", "x", "1"}};
  BOOST_CHECK_EQUAL(a::setting_item(s[0]), "dataloader[train.py:42].num_workers=4");
  BOOST_CHECK_EQUAL(a::try_command(s, {"python3", "train.py", "--lr", "1e-3 x"}),
                    "stallscope run --set 'dataloader[train.py:42].num_workers=4' --set loader.workers=2 "
                    "--set 'dataloader[it'\\''s.py:1].x=1' -- python3 train.py --lr '1e-3 x'");
  BOOST_CHECK_EQUAL(a::try_command({s[1]}, {}), "stallscope run --set loader.workers=2 -- <your command>");
  BOOST_CHECK_EQUAL(a::try_command({}, {"python3"}), "");
  const auto m = tune::merge_settings({"a.x=1", "b.y=2"}, {"b.y=3", "c.z=4"});
  BOOST_REQUIRE_EQUAL(m.size(), 3u);
  BOOST_CHECK_EQUAL(m[0], "a.x=1");
  BOOST_CHECK_EQUAL(m[1], "b.y=3");
  BOOST_CHECK_EQUAL(m[2], "c.z=4");
}

BOOST_AUTO_TEST_CASE(a_report_is_read_as_a_measurement) {
  const std::string doc = R"J({"schema":"stallscope.report","schema_version":1,"ranks":[{
    "summary":"input-bound: data.preprocessing 60 %",
    "steps":{"p50_ms":20.0,"steady":3},
    "step_table":[{"wall_ns":90000000,"warmup":true,"outlier":false},
                  {"wall_ns":19000000,"warmup":false,"outlier":false},
                  {"wall_ns":20000000,"warmup":false,"outlier":false},
                  {"wall_ns":21000000,"warmup":false,"outlier":false},
                  {"wall_ns":80000000,"warmup":false,"outlier":true}],
    "remedies":[{"id":"cache_decoded","title":"cache decoded samples","step_ms":20,
                 "predicted_step_ms":8,"bound":true,"try":"","set":[],"pytorch_knob":"a cache"},
                {"id":"raise_prefetch","title":"raise prefetch","step_ms":20,"predicted_step_ms":9,
                 "bound":false,"pytorch_knob":"DataLoader(prefetch_factor=4)",
                 "try":"stallscope run --set 'dataloader.prefetch_factor=4' -- python3 t.py"},
                {"id":"more_workers","title":"more workers","step_ms":20,"predicted_step_ms":10,
                 "bound":false,"pytorch_knob":"DataLoader(num_workers=4)",
                 "try":"stallscope run --set 'dataloader.num_workers=4' -- python3 t.py",
                 "set":["dataloader.num_workers=4"]}]}]})J";
  tune::Measurement m;
  std::string error;
  BOOST_REQUIRE_MESSAGE(tune::measurement_from_report(doc, &m, &error), error);
  BOOST_CHECK_EQUAL(m.steps, 3u);
  BOOST_CHECK_CLOSE(m.p50_ms, 20, 1e-9);
  BOOST_CHECK_CLOSE(m.spread_ms, 1.6, 1e-6);
  BOOST_CHECK_CLOSE(m.mean_ms, 35, 1e-6);  // the outlier in, as the remedies' step
  BOOST_CHECK_CLOSE(m.top_gain_ms, 12, 1e-9);
  BOOST_CHECK_EQUAL(m.top_title, "cache decoded samples");
  // Settings come from "set" only: raise_prefetch's "try" text alone is not read.
  BOOST_REQUIRE_EQUAL(m.remedies.size(), 1u);
  BOOST_CHECK_EQUAL(m.remedies[0].id, "more_workers");
  BOOST_CHECK_EQUAL(m.remedies[0].sets[0], "dataloader.num_workers=4");
  BOOST_CHECK_EQUAL(m.remedies[0].edit, "DataLoader(num_workers=4)");
  BOOST_CHECK(!tune::measurement_from_report("{\"schema\":\"x\"}", &m, &error));
  BOOST_CHECK(error.find("not a stallscope report") != std::string::npos);
  BOOST_CHECK(!tune::measurement_from_report(
      R"({"schema":"stallscope.report","ranks":[{"steps":{"p50_ms":1},"step_table":[],"remedies":[]}]})",
      &m, &error));
  BOOST_CHECK_EQUAL(error, "the report has no steady step");
}

BOOST_AUTO_TEST_SUITE_END()
