// The subcommands of `stallscope`. Each lives in its own file and registers
// itself on the top-level CLI11 app; main.cpp runs the one that was chosen.
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "stallscope/analyzer/expect.hpp"

namespace stallscope::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInput = 1;  // unreadable input, failed output
inline constexpr int kExitUsage = 2;  // bad flags or arguments
inline constexpr int kExitExpectation = 3;  // an --expect expectation failed (report, run)

struct Command {
  CLI::App* app = nullptr;   // the parsed subcommand
  std::function<int()> run;  // runs it after a successful parse; returns the exit code
};

Command add_info_command(CLI::App& parent);
Command add_export_command(CLI::App& parent);
Command add_report_command(CLI::App& parent);
Command add_diff_command(CLI::App& parent);
Command add_demo_command(CLI::App& parent);
#ifdef STALLSCOPE_HAVE_TOPO
Command add_topo_command(CLI::App& parent);  // cmd_topo.cpp, where hwloc is installed
#endif
Command add_run_command(CLI::App& parent);
Command add_ctl_command(CLI::App& parent);
Command add_scaling_command(CLI::App& parent);  // cmd_scaling.cpp
Command add_tune_command(CLI::App& parent);     // cmd_tune.cpp

// --expect: each item parsed; false after naming every bad one on stderr
// ("stallscope <cmd>: --expect '…': …").
bool parse_expectations(const std::string& cmd, const std::vector<std::string>& items,
                        std::vector<analyzer::Expectation>* out);
// Checks them on the report, one stderr line each ("expectation met: …" or
// "expectation failed: …"); false when any failed or could not be measured.
bool report_expectations(const std::string& cmd, const analyzer::Report& rep,
                         const std::vector<analyzer::Expectation>& expected);

// Expands files and run directories into trace files. Prints one line per
// path that yields none ("stallscope <cmd>: <path>: ...") and sets *failed.
std::vector<std::string> expand_inputs(const std::string& cmd,
                                       const std::vector<std::string>& paths, bool* failed);

// SIGXFSZ and SIGPIPE: a write past a file-size limit (ulimit -f) or into a
// closed pipe would kill stallscope silently. main() ignores both, so the
// write fails (EFBIG, EPIPE) and the command says which output it could not
// write and exits 1. Programs stallscope starts get the dispositions it
// inherited instead: spawn them with child_signal_defaults() reset to
// default, and run shell commands through shell().
void ignore_output_signals();
// Flushes standard output; false, with a message on stderr, when anything
// written to it was lost (a full disk, /dev/full, a closed pipe).
bool stdout_complete();
// The signals to reset to default in a child (posix_spawnattr_setsigdefault).
sigset_t child_signal_defaults();
// std::system(cmd) with the dispositions stallscope inherited.
int shell(const std::string& cmd);

// Prints "[i/n] path" on one rewritten stderr line when stderr is a
// terminal (long runs show progress; logs stay clean). Call with i == n to
// clear the line.
void show_progress(size_t i, size_t n, const std::string& path);

}  // namespace stallscope::cli
