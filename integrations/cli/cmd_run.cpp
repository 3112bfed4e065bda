// `stallscope run [options] -- CMD ARGS…`: attaches to a training job nobody
// changed. Starts CMD with the preload shim, records from the start, closes
// the capture window after step M+N (or a time window when no step source
// appears), prints the report while the job goes on untraced, and exits with
// the job's exit status — or, with --exit-after-window, ends the job once the
// window is on disk and the report written, and exits 0 (docs/attach.md,
// docs/cli.md).
#include "cmd_run.hpp"
#include "cmd_run_live.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
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
// A rank that does not report, ending its job: waiting for rank 0's report.
constexpr double kReportWaitS = 2 * kRankWaitS;
// Ending the job: for every recorder to complete its file after "end".
constexpr double kEndWaitS = 10;
// After the command exited: for processes it left (Python's resource
// tracker, a worker finishing) to complete their files before the report.
constexpr double kLeftWaitS = 2;

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
  double report_started_at = 0;
  std::atomic<bool> report_done{false};
  LiveLine live{live_line_wanted(opt.quiet)};
  std::atomic<int> report_rc{kExitOk};

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
    live.erase();
    std::cerr << "stallscope run: capture " << (on ? "on" : "off") << " (" << why << ")\n";
  }

  void start_report(const std::string& note) {
    report_started = true;
    report_started_at = now_s();
    live.stop();  // the report replaces it
    if (!reports()) return;
    // On a thread: signals are still forwarded while the analyzer reads.
    report_thread = std::thread([this, note, ended = child_done] {
      report_rc = write_run_report(run_dir, opt.report, note, opt.expectations, ended);
      report_done = true;
    });
  }

  void reap() {
    if (child_done) return;
    // A subreaper also reaps the job's orphans as they exit.
    if (!opt.exit_after.empty()) return reap_children(child, &status, &child_done);
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
        live.stop();
        if (reports())
          std::cerr << (opt.exit_after.empty()
                            ? "stallscope run: writing the report; the job goes on untraced\n"
                            : "stallscope run: writing the report; then the job is ended "
                              "(--exit-after-window)\n");
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
    // The processes the command left (a descendant still writing its file)
    // get a moment to complete their files: a report read before would
    // call them cut. Progress files say when (read_progress counts a
    // process that is gone as ended).
    const double left_until = now_s() + kLeftWaitS;
    while (reports() && now_s() < left_until && !files_ended(read_progress(run_dir)))
      ::usleep(kPollMs * 1000 / 5);
    window.want_close(now_s(), read_progress(run_dir));  // last step count
    if (closed) return start_report(window.describe());
    start_report(window.step_based()
                     ? "the job ended before the capture window closed: the report covers the "
                       "whole run"
                     : "the job ended before the time window closed (no step source appeared): "
                       "the report covers the whole run");
  }

  // --exit-after-window: every window on disk (the report waited for them)
  // and the report written; a rank that does not report waits for rank 0's.
  bool may_end() const {
    if (opt.exit_after.empty() || !report_started) return false;
    if (reports()) return report_done;
    return ::access((run_dir + "/report.json").c_str(), F_OK) == 0 ||
           now_s() - report_started_at > kReportWaitS;
  }

  // Asks every recorder of the run to complete its file (End chunk) before
  // the processes are killed, and waits for them; a file not completed in
  // time stays readable up to its last flush (cut).
  void complete_files() {
    if (const std::string err = write_control_word(run_dir, "end"); !err.empty()) {
      std::cerr << "stallscope run: cannot ask the recorders to complete their files: " << err
                << "\n";
      return;
    }
    const double until = now_s() + kEndWaitS;
    while (!files_ended(read_progress(run_dir)) && now_s() < until) {
      reap_children(child, &status, &child_done);
      ::usleep(kPollMs * 1000 / 5);
    }
    std::string open;
    for (const auto& p : read_progress(run_dir))
      if (!p.ended) open += " " + p.base + ".sst";
    if (!open.empty())
      std::cerr << "stallscope run: not completed in " << kEndWaitS << " s, readable up to their "
                << "last flush (cut):" << open << "\n";
  }

  int end_the_job() {
    if (report_thread.joinable()) report_thread.join();
    // Asked before any signal: SIGKILL leaves a recorder no chance, and the
    // program's own handler may ignore SIGTERM.
    complete_files();
    const bool term = opt.exit_after == "term";
    const EndResult r = end_job(child, term, opt.exit_grace_s, &status, &child_done);
    std::cerr << "stallscope run: --exit-after-window" << (term ? "=term" : "")
              << ": the capture window is on disk and the report written; ended the job (";
    if (term)
      std::cerr << "SIGTERM to " << r.terminated << " process(es), then SIGKILL to " << r.killed
                << " still running after " << opt.exit_grace_s << " s";
    else
      std::cerr << "SIGKILL to " << r.killed << " process(es)";
    if (r.left.empty()) {
      const int rc = expectation_rc();
      std::cerr << "); exit status " << rc << "\n";
      return rc;
    }
    std::cerr << "); " << r.left.size() << " process(es) would not end (pid";
    for (pid_t p : r.left) std::cerr << " " << p;
    std::cerr << ")\n";
    return kExitInput;
  }

  // kExitExpectation when the report's --expect failed, else 0.
  int expectation_rc() const {
    return report_rc == kExitExpectation ? kExitExpectation : kExitOk;
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
      if (!child_done && reports()) live.update(now_s(), run_dir);  // rank 0 only
      if (!child_done && may_end()) return;
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
  if (!o.exit_after.empty())
    if (const std::string err = become_subreaper(); !err.empty())
      std::cerr << "stallscope run: cannot become a child subreaper (" << err
                << "): --exit-after-window ends only the processes still linked to the command\n";
  for (const auto& item : o.settings) {
    TriedSetting t;
    check_setting_arg(item, &t);
    std::cerr << "stallscope run: will try " << item << " on " << t.picks << "\n";
  }
  s.child = spawn_child(path, o.command, env.vars, child_mask);
  if (s.child < 0) {
    std::cerr << "stallscope run: cannot start " << path << ": " << std::strerror(-s.child) << "\n";
    ::close(sfd);
    return kExitNotFound;
  }
  std::cerr << "stallscope run: recording " << o.command.front() << " (pid " << s.child << ") into "
            << env.run_dir << (env.python_hooks ? " with the Python hooks" : "") << "\n";
  s.loop(sfd);
  if (!s.child_done) {  // --exit-after-window
    const int rc = s.end_the_job();
    ::close(sfd);
    return rc;
  }
  s.final_report();
  if (s.report_thread.joinable()) s.report_thread.join();
  ::close(sfd);
  // A failed --expect turns a clean exit into kExitExpectation; the
  // command's own failure stays what it was.
  const int rc = exit_code_of(s.status);
  return rc == kExitOk ? s.expectation_rc() : rc;
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
  if (!o.exit_after.empty() && o.exit_after != "kill" && o.exit_after != "term") {
    std::cerr << "stallscope run: --exit-after-window=" << o.exit_after
              << ": expected kill (the default) or term\n";
    return kExitUsage;
  }
  if (!o.headspace.empty()) {
    char* end = nullptr;
    const long k = std::strtol(o.headspace.c_str(), &end, 10);
    if (end == o.headspace.c_str() || *end != '\0' || k < 1 || k > 100000) {
      std::cerr << "stallscope run: --headspace=" << o.headspace
                << ": expected a batch count from 1 to 100000\n";
      return kExitUsage;
    }
    // The window begins once replay has: K batches kept, one step after.
    if (o.start_step < k + 2) {
      o.start_step = k + 2;
      std::cerr << "stallscope run: --headspace=" << k << ": the window begins at step "
                << o.start_step << ", after the " << k << " batches kept\n";
    }
    if (o.exit_after.empty()) o.exit_after = "kill";
  }
  for (const auto& t : check_setting_args(o.sets)) o.settings.push_back(t.item);
  if (const std::string why = settings_env_problem(o.settings); !why.empty()) {
    std::cerr << "stallscope run: --set: " << why << "\n";
    return kExitUsage;
  }
  if (!parse_expectations("run", o.expect, &o.expectations)) return kExitUsage;
  const std::string path = resolve_command(o.command.front());
  if (path.empty()) {
    std::cerr << "stallscope run: " << o.command.front() << ": command not found\n";
    return kExitNotFound;
  }
  if (const std::string why = attach_obstacle(path); !why.empty()) {
    std::cerr << "stallscope run: " << why << "\n";
    return kExitUsage;
  }
  if (!o.headspace.empty() &&
      (o.no_python_hooks || (!is_python_command(o.command.front()) &&
                             !is_python_command(script_interpreter_of(path))))) {
    std::cerr << "stallscope run: --headspace replays the batches of PyTorch DataLoaders, through "
                 "the Python hooks: "
              << o.command.front()
              << (o.no_python_hooks ? " runs with --no-python-hooks" : " is not a Python command")
              << "\n";
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
  sub->add_flag("--quiet", o->quiet,
                "No live status line on stderr (steps, step p50; shown only on a terminal)");
  sub->add_flag("--no-python-hooks", o->no_python_hooks,
                "Do not add the DataLoader and optimizer hooks to a Python command");
  sub->add_option("--set", o->sets,
                  "Try a setting without editing the program (repeatable): "
                  "dataloader[SELECTOR].FIELD=V for the PyTorch DataLoaders, loader.KNOB=V for "
                  "stallscope's loader; passed in STALLSCOPE_SET")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  sub->add_flag("--exit-after-window{kill}", o->exit_after,
                "End the job once the capture window is on disk and the report written: SIGKILL "
                "to every process of the job (=term: SIGTERM first, SIGKILL after --exit-grace); "
                "exit 0");
  sub->add_option("--expect", o->expect,
                  "A regression gate on the report: METRIC OP VALUE, e.g. 'data_stall<5%' "
                  "(repeatable; as stallscope report --expect; a failed one exits 3)")
      ->type_name("EXPR")
      ->allow_extra_args(false);
  sub->add_flag("--headspace{8}", o->headspace,
                "Measure the step with data for free: each DataLoader's first K batches (8) are "
                "handed out again instead of loading; the window begins after them; implies "
                "--exit-after-window")
      ->type_name("K");
  sub->add_option("--exit-grace", o->exit_grace_s,
                  "--exit-after-window=term: seconds from SIGTERM to SIGKILL")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  // After "--" every word is positional: the command's own options are
  // never taken for ours.
  sub->add_option("CMD", o->command, "The command to run, after --")->required();
  const std::string set_keys = "--set keys: " + run::known_setting_keys() + ";\n";
  sub->footer(
      "Example: stallscope run -- python train.py --epochs 1\n"
      "SIGUSR2 to stallscope run, or 'stallscope ctl RUN on|off', toggles capture.\n" +
      set_keys +
      "  SELECTOR: [N] the N-th DataLoader constructed, [file:line] its construction site,\n"
      "  [DatasetClass]; none: every DataLoader. Booleans true/false, 1/0, yes/no, on/off.\n"
      "  Example: --set dataloader[train.py:42].num_workers=4 --set loader.workers=4\n"
      "Exit status: the command's (128+N when killed by signal N); 0 when --exit-after-window "
      "ended it; 3 instead of 0 when an --expect expectation failed on the report; 2 usage "
      "error or a program that cannot be attached (static, setuid); 127 command not found.");
  return {sub, [o] { return run::run_command(*o); }};
}

}  // namespace stallscope::cli
