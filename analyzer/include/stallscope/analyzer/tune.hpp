// stallscope analyzer — the search behind `stallscope tune`: run the job as
// is, apply the top remedy's settings, measure, follow the new report's top
// remedy, and stop when the gain left is small, a trial is worse beyond the
// run-to-run noise, or the trials are spent (docs/attach.md, "Tuning").
//
// The search only decides; running a trial is the caller's Runner (the CLI
// starts `stallscope run --exit-after-window --set …`; tests simulate a job):
//
//   tune::Options o;  o.trials = 4;
//   tune::Result r = tune::search(o, [&](const tune::Request& q) { return run_trial(q); });
//   r.trials[r.best].settings …
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace stallscope::analyzer::tune {

// A remedy of a trial's report that carries settings to try.
struct Candidate {
  std::string id, title;
  std::vector<std::string> sets;  // --set items, "dataloader[train.py:42].num_workers=4"
  std::string edit;               // the line of the program to edit (the remedy's knob text)
  double step_ms = 0, predicted_step_ms = 0;
  bool bound = false;             // the prediction is a bound ("at best")
  double gain_ms() const noexcept { return step_ms - predicted_step_ms; }
};

// What one trial's window measured.
struct Measurement {
  bool ok = false;
  std::string failure;  // why not ok: "exit status 135 (killed by SIGBUS) before the window closed"
  double p50_ms = 0;    // median steady step
  double mean_ms = 0;   // mean steady step (the remedies predict against it)
  double se_ms = 0;     // standard error of that median, from the steady steps' spread
  double spread_ms = 0; // p90 - p10 of the steady steps
  size_t steps = 0;     // steady steps
  std::string summary;  // the report's verdict line
  double top_gain_ms = 0;  // the report's first remedy's predicted gain (settings or not)
  std::string top_title;   // its title
  std::vector<Candidate> remedies;  // the report's remedies that carry settings, in its order
};

// Fills p50, mean, se and spread from the steady steps' durations (ms).
void measure_steps(std::vector<double> steps_ms, Measurement* m);

// Reads rank 0 (else the first rank) of a stallscope.report JSON document (the trial's
// RUN/report.json). False with *error when it is not one or has no steady
// step.
bool measurement_from_report(const std::string& json_text, Measurement* out, std::string* error);

// `base` with `add` applied: an item whose key (the text before '=') is in
// `base` replaces it there, others are appended.
std::vector<std::string> merge_settings(const std::vector<std::string>& base,
                                        const std::vector<std::string>& add);

struct Options {
  int trials = 4;                  // runs after the baseline (repeats included)
  double min_gain_share = 0.05;    // stop when the best predicted gain left is below this share of the step
  double tolerance = 0.25;         // share of a predicted gain that may be missing and still "delivered"
  double noise_floor_share = 0.02; // the noise is never taken below this share of the step
  double noise_sigmas = 3;         // a difference beyond this many standard errors is not noise
  bool repeat_in_doubt = true;     // a trial within the noise but not better runs once more
  double ceiling_ms = 0;           // the headspace run's step (0: none): no input remedy goes below it
  std::vector<std::string> initial;  // settings every trial starts from (tune --set)
};

// One run the search asks for.
struct Request {
  int trial = 0;    // 0: the baseline
  int attempt = 0;  // 1 for a repeat
  std::vector<std::string> settings;
  std::string remedy_id;  // what this trial adds ("" for the baseline)
};
using Runner = std::function<Measurement(const Request&)>;

enum class Outcome { kBaseline, kBetter, kWithinNoise, kWorse, kFailed };
const char* outcome_name(Outcome o);  // "baseline", "better", "within noise", "worse", "setting failed"

struct Trial {
  int index = 0;
  std::vector<std::string> settings;  // every setting of the trial
  std::vector<std::string> added;     // what it added to the trial it is based on
  std::string remedy_id, remedy_title, edit;
  int based_on = -1;         // the trial whose report proposed it
  double based_on_ms = 0;    // that trial's step
  double predicted_ms = 0;   // the remedy's predicted step (the ceiling where it is lower)
  bool bound = false;
  Measurement m;             // the trial's measurement (the repeat's where it was repeated)
  std::vector<double> run_p50s;  // every run's step: one, or two with a repeat
  double p50_ms = 0;         // the step taken: the mean of run_p50s
  double mean_ms = 0;        // the mean steady step, averaged over the runs (for the delivery)
  double noise_ms = 0;       // the noise it was judged against
  Outcome outcome = Outcome::kBaseline;
  std::string delivered;     // "delivered (…)", "not delivered (…)", or "" for the baseline / a failure
};

struct Result {
  std::vector<Trial> trials;
  int best = -1;  // the trial with the lowest step (-1: the baseline failed)
  int runs = 0;   // runs after the baseline
  std::string stop_reason;
};

// `progress` (may be empty) hears one line when a run starts and when a
// trial is judged.
Result search(const Options& o, const Runner& run,
              const std::function<void(const std::string&)>& progress = {});

// The difference of two steps that is not noise.
double noise_ms(const Measurement& a, const Measurement& b, const Options& o);

}  // namespace stallscope::analyzer::tune
