// `stallscope info PATH...`: what each trace file holds (tracks, events per
// kind, span, drops, complete/cut/error) and run-level totals.
#include <iostream>
#include <sstream>
#include <memory>

#include "commands.hpp"
#include "stallscope/file_summary.hpp"

namespace stallscope::cli {

namespace {

struct InfoOptions {
  std::vector<std::string> paths;
};

int run_info(const InfoOptions& opt) {
  bool failed = false;
  const auto files = expand_inputs("info", opt.paths, &failed);
  if (files.empty()) return kExitInput;
  const auto run = reader::summarize_run(files, show_progress);
  show_progress(files.size(), files.size(), "");
  // Thread, host and path names come from the traces: escaped for the terminal.
  std::ostringstream text;
  reader::print_run_summary(text, run);
  std::cout << reader::terminal_safe(text.str());
  std::cout.flush();
  for (const auto& f : run.files)
    if (f.status == reader::Status::kError)
      std::cerr << "stallscope info: " << reader::terminal_safe(f.error) << "\n";
  return failed || run.files_error > 0 ? kExitInput : kExitOk;
}

}  // namespace

Command add_info_command(CLI::App& parent) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* sub =
      parent.add_subcommand("info", "Summarize trace files: tracks, events, span, drops");
  sub->add_option("PATH", opt->paths,
                  "Trace files (.sst) or run directories (their *.sst files are read)")
      ->required()
      ->type_name("PATH");
  sub->footer(
      "Per file: process (pid, host, rank), status (complete; cut = no End chunk, with the\n"
      "bytes lost; error = unreadable from an offset on), events by kind, time span, tracks,\n"
      "drops (buffer: gap records and End totals; disk budget; ring discarded).\n"
      "Then ring segments grouped by process and run totals with disk used vs budget.\n"
      "Exit status (as report and export): 0 all readable (cut files included), 1 an input\n"
      "missing or unreadable, even in part (the readable part is still summarized), 2 usage\n"
      "error.");
  return {sub, [opt] { return run_info(*opt); }};
}

}  // namespace stallscope::cli
