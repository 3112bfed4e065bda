// The live status line of `stallscope run` (cmd_run_live.cpp): on a
// terminal, one line on stderr that is rewritten in place while the job
// runs, fed only by the progress files the recorder already writes
// (RUN/progress/*, a few dozen bytes each), never by the traces:
//
//   stallscope: 412 steps (capture on) · step p50 21.3 ms · 19.2 steps/s · largest so far: data wait 48 %
//
// "largest so far" is the largest of the data waits, kernels, copies and
// collectives summed over the records on disk, or the rest of the step
// ("compute (CPU)" without device records, else "host"), against the summed
// step time: a hint while it runs, not the report's attribution. The line is
// cut to the terminal's width.
// Off when stderr is not a terminal or with --quiet. The step time is
// estimated from the step counts' growth between reads (the median of the
// last 32 intervals' time per step), so it needs no trace reading.
#pragma once

#include <string>
#include <vector>

#include "cmd_run.hpp"

namespace stallscope::cli::run {

class LiveLine {
 public:
  // enabled: stderr is a terminal and --quiet was not given.
  explicit LiveLine(bool enabled) : on_(enabled) {}
  ~LiveLine() { erase(); }
  // Redraws the line at most every kMinIntervalS; reads the progress files
  // only then.
  void update(double now_s, const std::string& run_dir);
  // Removes the line (before other output, and for good before the report).
  void erase();
  void stop() {
    erase();
    on_ = false;
  }
  // The text for a set of progress files and the step-time estimate (for
  // tests): "" when no step has been seen.
  static std::string text(const std::vector<ProcessProgress>& p, double step_p50_ms,
                          double steps_per_s);

  static constexpr double kMinIntervalS = 0.25;  // at most 4 redraws a second

 private:
  bool on_ = false;
  bool shown_ = false;
  double last_draw_ = -1;
  double last_t_ = -1;
  uint64_t last_steps_ = 0;
  std::vector<double> per_step_ms_;  // ring of the last intervals' ms per step
  size_t next_ = 0;
  double rate_ = 0;
};

// Whether the live line is on: stderr is a terminal and not --quiet.
bool live_line_wanted(bool quiet);

}  // namespace stallscope::cli::run
