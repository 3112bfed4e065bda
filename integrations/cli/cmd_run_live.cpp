// The live status line of `stallscope run` (see cmd_run_live.hpp).
// Cost: at most 4 reads a second of RUN/progress/* (one short line per
// traced process, read_progress) and one write of under 100 bytes to the
// terminal; no trace is opened.
#include "cmd_run_live.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace stallscope::cli::run {

namespace {
constexpr size_t kIntervals = 32;
}

bool live_line_wanted(bool quiet) {
  return !quiet && ::isatty(STDERR_FILENO) == 1;
}

std::string LiveLine::text(const std::vector<ProcessProgress>& p, double step_p50_ms,
                           double steps_per_s) {
  uint64_t steps = 0;
  bool capture = false;
  size_t procs = 0;
  for (const auto& x : p) {
    if (x.rank < 0) continue;  // a launcher
    ++procs;
    steps = std::max(steps, x.steps);
    capture = capture || x.capture;
  }
  if (steps == 0) return "";
  char b[200];
  int n = std::snprintf(b, sizeof b, "stallscope: %llu steps (capture %s)",
                        static_cast<unsigned long long>(steps), capture ? "on" : "off");
  if (procs > 1) n += std::snprintf(b + n, sizeof b - size_t(n), " on the busiest of %zu processes", procs);
  if (step_p50_ms > 0)
    n += std::snprintf(b + n, sizeof b - size_t(n), " · step p50 %.1f ms", step_p50_ms);
  if (steps_per_s > 0) std::snprintf(b + n, sizeof b - size_t(n), " · %.1f steps/s", steps_per_s);
  return b;
}

void LiveLine::update(double now_s, const std::string& run_dir) {
  if (!on_ || (last_draw_ >= 0 && now_s - last_draw_ < kMinIntervalS)) return;
  last_draw_ = now_s;
  const auto progress = read_progress(run_dir);
  uint64_t steps = 0;
  for (const auto& x : progress)
    if (x.rank >= 0) steps = std::max(steps, x.steps);
  if (last_t_ >= 0 && steps > last_steps_) {
    const double ms = 1e3 * (now_s - last_t_) / double(steps - last_steps_);
    if (per_step_ms_.size() < kIntervals)
      per_step_ms_.push_back(ms);
    else
      per_step_ms_[next_++ % kIntervals] = ms;
    rate_ = 1e3 / ms;
  }
  if (last_t_ < 0 || steps != last_steps_) {
    last_t_ = now_s;
    last_steps_ = steps;
  }
  double p50 = 0;
  if (!per_step_ms_.empty()) {
    std::vector<double> v = per_step_ms_;
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    p50 = v[v.size() / 2];
  }
  const std::string t = text(progress, p50, rate_);
  if (t.empty()) return;
  // Drawn from column 0, the rest of the row cleared, the cursor back at
  // column 0: output of the job then starts at the row's beginning.
  const std::string s = "\r" + t + "\033[K\r";
  if (::write(STDERR_FILENO, s.data(), s.size()) > 0) shown_ = true;
}

void LiveLine::erase() {
  if (!shown_) return;
  shown_ = false;
  static const char kErase[] = "\r\033[K";
  (void)!::write(STDERR_FILENO, kErase, sizeof kErase - 1);
}

}  // namespace stallscope::cli::run
