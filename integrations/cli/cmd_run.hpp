// `stallscope run` internals, one concern per file:
//   cmd_run.cpp         options and the supervision loop
//   cmd_run_env.cpp     the child's environment (shim, run directory, hooks)
//   cmd_run_exec.cpp    can the program be attached (ELF, setuid), spawning
//   cmd_run_signals.cpp signals of `stallscope run` itself (forwarding, SIGUSR2)
//   cmd_run_window.cpp  step progress files and the capture window
//   cmd_run_report.cpp  the report, written and printed while the job goes on
//   cmd_run_set.cpp     --set: settings tried, checked and put in STALLSCOPE_SET
//   cmd_run_end.cpp     --exit-after-window: the job's processes, ended
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stallscope/analyzer/expect.hpp"

namespace stallscope::cli::run {

struct RunOptions {
  std::string out;               // --out (empty: derived from the job)
  int64_t start_step = 5;        // --start-step
  int64_t steps = 100;           // --steps
  double start_after_s = 0;      // --start-after
  double duration_s = 90;        // --duration
  std::string report = "text";   // --report text|json|html
  bool no_python_hooks = false;  // --no-python-hooks
  bool quiet = false;            // --quiet: no live status line (cmd_run_live.hpp)
  std::vector<std::string> sets;  // --set KEY=VALUE, as given
  std::string exit_after;         // --exit-after-window[=kill|term]; "" when not given
  double exit_grace_s = 10;       // --exit-grace: SIGTERM to SIGKILL with =term
  // --headspace[=K]: the DataLoaders' first K batches replayed (data for
  // free); "" when not given. Implies --exit-after-window.
  std::string headspace;
  // The --set items that passed the checks, normalized (cmd_run_set.cpp):
  // STALLSCOPE_SET when any --set was given, else it passes on as inherited.
  std::vector<std::string> settings;
  std::vector<std::string> expect;                  // --expect, as given
  std::vector<analyzer::Expectation> expectations;  // parsed (run_command)
  std::vector<std::string> command;
};

// ---- environment (cmd_run_env.cpp)
struct ChildEnv {
  std::vector<std::string> vars;  // NAME=value, the whole environment
  std::string run_dir;
  bool python_hooks = false;
};
// Where the preload shim is: STALLSCOPE_PRELOAD_LIB, else
// <dir of this executable>/../lib/libstallscope_preload.so. "" with *error.
std::string find_preload_lib(std::string* error);
// What keeps `path` from being the preload shim (cmd_run_lib.cpp), read
// without loading it: "" for a regular ELF shared object of this machine
// that defines the shim's marker symbol; else the reason, as a phrase
// ("not an ELF file", "a shared object, but not stallscope's preload shim …").
std::string preload_lib_problem(const std::string& path);
// The folder holding hooks/sitecustomize.py and the stallscope package.
std::string find_python_dir();
// True when argv[0]'s base name starts with "python".
bool is_python_command(const std::string& argv0);
// Claims the run directory (as the recorder would) and builds the child's
// environment. Returns false with *error naming what was wrong.
bool build_child_env(const RunOptions& o, const std::string& preload, ChildEnv* env,
                     std::string* error);

// ---- attaching and starting (cmd_run_exec.cpp)
// The file execvp would run for `argv0` ("" when not found).
std::string resolve_command(const std::string& argv0);
// The interpreter of a `#!` script (env resolved on PATH), or "".
std::string script_interpreter_of(const std::string& path);
// Why LD_PRELOAD cannot reach `path` (static, setuid/setgid), or "" when it can.
std::string attach_obstacle(const std::string& path);
// Starts the program at `path` with `argv`, `env` and the signal mask
// `child_mask`; returns its pid or -errno.
pid_t spawn_child(const std::string& path, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, const sigset_t& child_mask);

// ---- signals of `stallscope run` (cmd_run_signals.cpp)
enum class SignalAction { kNone, kForwarded, kToggleCapture, kChildChanged };
// Blocks the handled signals and opens a signalfd for them; *old_mask gets
// the mask to give the child. Returns the fd or -errno.
int open_signal_fd(sigset_t* old_mask);
// Reads one pending signal; forwards INT/TERM/HUP/QUIT sent by a process
// (a terminal's ^C reaches the child's process group by itself).
SignalAction handle_signal(int sfd, pid_t child);

// ---- progress and the window (cmd_run_window.cpp)
struct ProcessProgress {
  std::string base;  // trace file base, "<host>-r<rank>-<pid>"
  int rank = 0;      // -1 for a launcher
  int pid = 0;
  uint64_t steps = 0;
  uint64_t windows_closed = 0;
  bool capture = false;
  bool ended = false;  // the final flush happened, or the process is gone
  // Durations summed over its records on disk (ms; -1: a recorder that does
  // not publish them): steps, data waits, kernels, copies, collectives.
  double step_ms = -1, wait_ms = -1, kernel_ms = -1, copy_ms = -1, comm_ms = -1;
};
// Reads RUN/progress/*; unreadable or half-written files are skipped. A
// process of this host that is gone (process_gone) counts as ended.
std::vector<ProcessProgress> read_progress(const std::string& run_dir);
// True when a trace or progress file base ("<host>-r<rank>-<pid>") names
// this host.
bool on_this_host(const std::string& base);
// True when the process `pid` of this host that wrote a file at
// `written_s` (realtime seconds; 0: unknown) is gone: no such process, a
// zombie, or one started after then (its pid reused).
bool process_gone(int pid, double written_s);
// Writes "on" or "off" into RUN/control. Returns "" or an error text.
std::string write_control(const std::string& run_dir, bool on);
// Writes a control word: "on", "off", or "end" (every recorder completes
// its file and stops tracing, as at exit). Returns "" or an error text.
std::string write_control_word(const std::string& run_dir, const std::string& word);
// True when every process's file is complete (final flush) or it is gone.
bool files_ended(const std::vector<ProcessProgress>& p);

class Window {
 public:
  Window(const RunOptions& o, double t0_s) : opt_(o), t0_(t0_s) {}
  // Whether capture should be switched on now (--start-after elapsed).
  bool want_open(double now_s) const;
  // Whether the window should close now, given the progress read.
  bool want_close(double now_s, const std::vector<ProcessProgress>& p);
  bool step_based() const { return step_based_; }
  uint64_t max_steps() const { return max_steps_; }
  std::string describe() const;  // one line for the report

 private:
  const RunOptions& opt_;
  double t0_;
  bool step_based_ = false;
  uint64_t max_steps_ = 0;
};

// True when every process of `rank` (every rank when rank < 0) wrote its
// window-end record or ended; `world` ranks must all be present when > 1.
bool windows_on_disk(const std::vector<ProcessProgress>& p, int world);

// ---- report (cmd_run_report.cpp)
// Analyzes the run directory, writes RUN/report.{txt,json,html} and prints
// the report (text or json) or the HTML path on stderr. `note` is added to
// the report's warnings. With `job_ended` (the job's command exited), a file
// whose process still runs is said to be still being written, not cut.
// Then checks `expected` (--expect) on it. Returns 0, kExitExpectation when
// one failed, or kExitInput.
int write_run_report(const std::string& run_dir, const std::string& format,
                     const std::string& note,
                     const std::vector<analyzer::Expectation>& expected = {},
                     bool job_ended = false);

// ---- settings tried (cmd_run_set.cpp)
struct TriedSetting {
  std::string item;   // normalized "dataloader[train.py:42].num_workers=4"
  std::string picks;  // which loaders it is for, for people
};
// Checks one --set argument: "" with *out filled, or what is wrong with it.
std::string check_setting_arg(const std::string& arg, TriedSetting* out);
// Checks each argument; each bad one is named on stderr in one line
// ("stallscope: --set 'K=V': <why>; not applied") and left out.
std::vector<TriedSetting> check_setting_args(const std::vector<std::string>& args);
// "" when STALLSCOPE_SET holding `items` (checked, normalized) can be
// passed to a program, else why not: the kernel refuses one environment
// string past MAX_ARG_STRLEN (32 pages, 128 KiB with 4 KiB pages).
std::string settings_env_problem(const std::vector<std::string>& items);
// Every key --set knows, for --help and errors.
std::string known_setting_keys();

// ---- ending the job (cmd_run_end.cpp)
// Makes this process a child subreaper: orphans of the job are reparented
// to it. "" or the error text.
std::string become_subreaper();
// The processes descending from this one, by /proc parent links.
std::vector<pid_t> job_processes(bool with_zombies);
// Reaps every child that exited; `child`'s status goes to *status.
void reap_children(pid_t child, int* status, bool* child_done);
struct EndResult {
  size_t terminated = 0;    // sent SIGTERM
  size_t killed = 0;        // sent SIGKILL
  std::vector<pid_t> left;  // still there after the last wait (uninterruptible sleep)
};
// Ends the job: with `term` SIGTERM to each process and up to grace_s for
// them to exit, then SIGKILL until no process is left; reaps them all.
EndResult end_job(pid_t child, bool term, double grace_s, int* status, bool* child_done);

// ---- launcher (cmd_run_env.cpp)
struct LauncherRank {
  bool under_launcher = false;
  int rank = 0;
  int world = 1;
};
LauncherRank launcher_rank();

}  // namespace stallscope::cli::run
