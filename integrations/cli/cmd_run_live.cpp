// The live status line of `stallscope run` (see cmd_run_live.hpp).
// Cost: at most 4 reads a second of RUN/progress/* (one short line per
// traced process, read_progress) and one write of under 200 bytes to the
// terminal; no trace is opened.
#include "cmd_run_live.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace stallscope::cli::run {

namespace {
constexpr size_t kIntervals = 32;

// "data wait 48 %": the largest of the processes' summed data waits,
// kernels, copies and collectives, or the rest of the step, as a share of
// their step time so far ("" before a step ended or from older recorders).
std::string largest_so_far(const std::vector<ProcessProgress>& p) {
  double step = 0, wait = 0, kernel = 0, copy = 0, comm = 0;
  for (const auto& x : p) {
    if (x.rank < 0 || x.step_ms <= 0) continue;
    step += x.step_ms;
    wait += std::max(x.wait_ms, 0.0);
    kernel += std::max(x.kernel_ms, 0.0);
    copy += std::max(x.copy_ms, 0.0);
    comm += std::max(x.comm_ms, 0.0);
  }
  if (step <= 0) return "";
  const bool device = kernel + copy + comm > 0;
  const double rest = std::max(step - wait - kernel - copy - comm, 0.0);
  const std::pair<const char*, double> parts[] = {{"data wait", wait},
                                                  {"GPU kernels", kernel},
                                                  {"copies", copy},
                                                  {"collectives", comm},
                                                  {device ? "host" : "compute (CPU)", rest}};
  const auto* top = &parts[0];
  for (const auto& x : parts)
    if (x.second > top->second) top = &x;
  char b[64];
  std::snprintf(b, sizeof b, "%s %.0f %%", top->first, std::min(top->second / step, 1.0) * 100);
  return b;
}
// The text cut to the terminal's width less one column (a line that wraps
// could not be rewritten in place); whole UTF-8 characters. Unknown width:
// as it is.
std::string fit_terminal(const std::string& t) {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col < 2) return t;
  size_t cols = 0, i = 0;
  for (; i < t.size(); ++i) {
    if ((static_cast<unsigned char>(t[i]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (++cols > size_t(ws.ws_col) - 1) break;
  }
  return t.substr(0, i);
}
}  // namespace

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
  if (steps_per_s > 0) n += std::snprintf(b + n, sizeof b - size_t(n), " · %.1f steps/s", steps_per_s);
  if (const std::string top = largest_so_far(p); !top.empty() && n < int(sizeof b))
    std::snprintf(b + n, sizeof b - size_t(n), " · largest so far: %s", top.c_str());
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
  const std::string s = "\r" + fit_terminal(t) + "\033[K\r";
  if (::write(STDERR_FILENO, s.data(), s.size()) > 0) shown_ = true;
}

void LiveLine::erase() {
  if (!shown_) return;
  shown_ = false;
  static const char kErase[] = "\r\033[K";
  (void)!::write(STDERR_FILENO, kErase, sizeof kErase - 1);
}

}  // namespace stallscope::cli::run
