// stallscope — the command line. A dispatcher: each subcommand registers
// itself (commands.hpp) and runs when chosen. Exit codes: 0 success,
// 1 unreadable input or failed output, 2 usage error.
#include <malloc.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

constexpr const char* kFooter = R"(Examples:
  stallscope demo                                 a mis-tuned training job, diagnosed and fixed
  stallscope report stallscope-run/               where each step's time goes, what to change
  stallscope diff run-a/ run-b/                   did the change deliver the predicted gain?
  stallscope info stallscope-run/                 what each trace file holds
  stallscope export --chrome t.json run/ --steps 100:110
                                                  open t.json in ui.perfetto.dev

Run 'stallscope <command> --help' for a command's options; docs/cli.md has more.)";

// CLI11 reports --help and --version as "errors" with exit code 0.
int handle_parse_error(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);
  app.exit(e);  // prints the message and "Run with --help for more information."
  return stallscope::cli::kExitUsage;
}

int run(int argc, char** argv) {
  CLI::App app{"stallscope: where each training step's time goes, and what to change",
               "stallscope"};
  app.set_version_flag("--version", STALLSCOPE_VERSION);
  app.require_subcommand(1);
  app.footer(kFooter);
  std::vector<stallscope::cli::Command> commands = {
      stallscope::cli::add_info_command(app),
      stallscope::cli::add_export_command(app),
      stallscope::cli::add_report_command(app),
      stallscope::cli::add_diff_command(app),
      stallscope::cli::add_demo_command(app),
      stallscope::cli::add_run_command(app),
      stallscope::cli::add_ctl_command(app),
      stallscope::cli::add_scaling_command(app),
      stallscope::cli::add_tune_command(app),
  };
#ifdef STALLSCOPE_HAVE_TOPO
  commands.push_back(stallscope::cli::add_topo_command(app));
#endif
  // CLI11 would only say "A subcommand is required": name the unknown word.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    if (std::none_of(commands.begin(), commands.end(),
                     [&](const auto& c) { return c.app->get_name() == word; })) {
      std::string names;
      for (const auto& c : commands) {
        if (!names.empty()) names += ", ";
        names += c.app->get_name();
      }
      std::cerr << "stallscope: unknown command '" << word << "' (commands: " << names << ")\n"
                << "Run with --help for more information.\n";
      return stallscope::cli::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return handle_parse_error(app, e);
  }
  for (auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return stallscope::cli::kExitUsage;  // unreachable: a subcommand is required
}

}  // namespace

int main(int argc, char** argv) {
  // The analyzer's windows (lineage rings, sample tables, interval buffers)
  // grow by doubling: blocks of 1 MiB and more are mapped on their own, so a
  // grown-out block goes back to the system instead of staying in the heap
  // (glibc's adaptive threshold would keep blocks up to 32 MiB; ~60 MiB of
  // peak RSS on a 50 M-event trace).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  stallscope::cli::ignore_output_signals();
  int rc = stallscope::cli::kExitInput;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {  // out of memory, a failed stream …
    std::cerr << "stallscope: " << e.what() << "\n";
  }
  // A report cut by a full disk or a closed pipe is no success.
  if (!stallscope::cli::stdout_complete() && rc == stallscope::cli::kExitOk)
    rc = stallscope::cli::kExitInput;
  return rc;
}
