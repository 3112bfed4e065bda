// `stallscope run [options] -- CMD ARGS…`: attaches to a training job nobody
// changed. Starts CMD with the preload shim, records from the start, closes
// the capture window after step M+N (or a time window when no step source
// appears), prints the report while the job goes on untraced, and exits with
// the job's exit status (docs/attach.md, docs/cli.md).
#include "cmd_run.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "commands.hpp"

namespace stallscope::cli {
namespace run {
namespace {

constexpr int kPollMs = 100;
constexpr double kWindowWaitS = 10;  // for window-end records after "off"
constexpr double kRankWaitS = 60;    // rank 0 waiting for the other ranks
constexpr int kExitNotFound = 127;   // as a shell says "command not found"

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitInput;
}

// The state of one supervised job.
struct Supervisor {
  const RunOptions& opt;
  std::string run_dir;
  LauncherRank lr;
  pid_t child = -1;
  int status = 0;
  bool child_done = false;
  bool capture_on = true;
  bool opened = false, closed = false;
  double t0 = 0, closed_at = 0;
  Window window;
  std::thread report_thread;
  bool report_started = false;

  Supervisor(const RunOptions& o, std::string dir)
      : opt(o), run_dir(std::move(dir)), lr(launcher_rank()), window(o, now_s()) {
    t0 = now_s();
    capture_on = o.start_after_s <= 0;
    opened = capture_on;
  }

  bool reports() const { return !lr.under_launcher || lr.rank == 0; }

  void set_capture(bool on, const char* why) {
    const std::string err = write_control(run_dir, on);
    if (!err.empty()) {
      std::cerr << "stallscope run: cannot switch capture " << (on ? "on" : "off") << ": " << err
                << "\n";
      return;
    }
    capture_on = on;
    std::cerr << "stallscope run: capture " << (on ? "on" : "off") << " (" << why << ")\n";
  }

  void start_report(const std::string& note) {
    report_started = true;
    if (!reports()) return;
    // On a thread: signals are still forwarded while the analyzer reads.
    report_thread = std::thread([this, note] { write_run_report(run_dir, opt.report, note); });
  }

  void reap() {
    if (child_done) return;
    int st = 0;
    if (::waitpid(child, &st, WNOHANG) == child) {
      status = st;
      child_done = true;
    }
  }

  void tick() {
    const double t = now_s();
    if (!opened && window.want_open(t)) {
      opened = true;
      set_capture(true, "--start-after elapsed");
    }
    if (opened && !closed) {
      if (window.want_close(t, read_progress(run_dir))) {
        closed = true;
        closed_at = t;
        set_capture(false, window.step_based() ? "the step window is complete"
                                               : "the time window is complete");
      }
    }
    if (closed && !report_started) {
      const int world = reports() && lr.under_launcher ? lr.world : 1;
      const double wait = world > 1 ? kRankWaitS : kWindowWaitS;
      if (windows_on_disk(read_progress(run_dir), world) || t - closed_at > wait) {
        if (reports())
          std::cerr << "stallscope run: writing the report; the job goes on untraced\n";
        start_report(window.describe());
      }
    }
  }

  // After the job ended: the whole run, once the other ranks are done.
  void final_report() {
    if (report_started) return;
    const int world = reports() && lr.under_launcher ? lr.world : 1;
    const double until = now_s() + (world > 1 ? kRankWaitS : 0);
    while (world > 1 && now_s() < until && !windows_on_disk(read_progress(run_dir), world))
      ::usleep(kPollMs * 1000);
    window.want_close(now_s(), read_progress(run_dir));  // last step count
    if (closed) return start_report(window.describe());
    start_report(window.step_based()
                     ? "the job ended before the capture window closed: the report covers the "
                       "whole run"
                     : "the job ended before the time window closed (no step source appeared): "
                       "the report covers the whole run");
  }

  void loop(int sfd) {
    while (!child_done) {
      pollfd p{sfd, POLLIN, 0};
      if (::poll(&p, 1, kPollMs) > 0) {
        switch (handle_signal(sfd, child)) {
          case SignalAction::kToggleCapture:
            set_capture(!capture_on, "SIGUSR2");
            break;
          default:
            break;
        }
      }
      reap();
      if (!child_done) tick();
    }
  }
};

int supervise(const RunOptions& o, const std::string& path, const ChildEnv& env) {
  sigset_t child_mask;
  const int sfd = open_signal_fd(&child_mask);
  if (sfd < 0) {
    std::cerr << "stallscope run: cannot set up signal handling: " << std::strerror(-sfd) << "\n";
    return kExitInput;
  }
  Supervisor s(o, env.run_dir);
  s.child = spawn_child(path, o.command, env.vars, child_mask);
  if (s.child < 0) {
    std::cerr << "stallscope run: cannot start " << path << ": " << std::strerror(-s.child) << "\n";
    ::close(sfd);
    return kExitNotFound;
  }
  std::cerr << "stallscope run: recording " << o.command.front() << " (pid " << s.child << ") into "
            << env.run_dir << (env.python_hooks ? " with the Python hooks" : "") << "\n";
  s.loop(sfd);
  s.final_report();
  if (s.report_thread.joinable()) s.report_thread.join();
  ::close(sfd);
  return exit_code_of(s.status);
}

int run_command(RunOptions o) {
  if (!o.command.empty() && o.command.front() == "--") o.command.erase(o.command.begin());
  if (o.command.empty()) {
    std::cerr << "stallscope run: no command given (stallscope run [options] -- CMD ARGS...)\n";
    return kExitUsage;
  }
  if (o.report != "text" && o.report != "json" && o.report != "html") {
    std::cerr << "stallscope run: --report: expected text, json or html, got '" << o.report
              << "'\n";
    return kExitUsage;
  }
  const std::string path = resolve_command(o.command.front());
  if (path.empty()) {
    std::cerr << "stallscope run: " << o.command.front() << ": command not found\n";
    return kExitNotFound;
  }
  if (const std::string why = attach_obstacle(path); !why.empty()) {
    std::cerr << "stallscope run: " << why << "\n";
    return kExitUsage;
  }
  std::string error;
  const std::string preload = find_preload_lib(&error);
  ChildEnv env;
  if (preload.empty() || !build_child_env(o, preload, &env, &error)) {
    std::cerr << "stallscope run: " << error << "\n";
    return kExitInput;
  }
  return supervise(o, path, env);
}

}  // namespace
}  // namespace run

Command add_run_command(CLI::App& parent) {
  auto o = std::make_shared<run::RunOptions>();
  CLI::App* sub = parent.add_subcommand(
      "run", "Run a training command under stallscope and report where its steps' time goes");
  sub->add_option("--out", o->out, "Run directory (default: derived from the job)")
      ->type_name("DIR");
  sub->add_option("--start-step", o->start_step, "Warm-up steps before the window's steps")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--steps", o->steps, "Steps in the window; then the report, and the job goes on")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--start-after", o->start_after_s,
                  "Time window only: start capturing T seconds after start")
      ->type_name("T")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--duration", o->duration_s,
                  "Time window (no step source seen): seconds of capture")
      ->type_name("D")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--report", o->report, "Report format: text, json or html")
      ->capture_default_str();
  sub->add_flag("--no-python-hooks", o->no_python_hooks,
                "Do not add the DataLoader and optimizer hooks to a Python command");
  // After "--" every word is positional: the command's own options are
  // never taken for ours.
  sub->add_option("CMD", o->command, "The command to run, after --")->required();
  sub->footer(
      "Example: stallscope run -- python train.py --epochs 1\n"
      "SIGUSR2 to stallscope run, or 'stallscope ctl RUN on|off', toggles capture.\n"
      "Exit status: the command's (128+N when killed by signal N); 2 usage error or a program "
      "that cannot be attached (static, setuid); 127 command not found.");
  return {sub, [o] { return run::run_command(*o); }};
}

}  // namespace stallscope::cli
