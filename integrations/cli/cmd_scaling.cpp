// `stallscope scaling RUN_1 RUN_2 RUN_4 … [--json] [--html OUT.html]`: runs
// of one workload at several rank counts → throughput, scaling efficiency and
// what the lost efficiency went to (docs/scaling.md). With `--launch CMD
// --ranks 1,2,4 [--steps K]` it records the runs itself (cmd_scaling_launch.cpp).
#include "cmd_scaling.hpp"

#include <iostream>
#include <memory>

#include "cli_files.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/scaling.hpp"

namespace stallscope::cli {

namespace {

int run_scaling(ScalingArgs& in) {
  if (!in.launch.empty()) {
    if (!in.runs.empty()) {
      std::cerr << "stallscope scaling: give either RUN directories or --launch, not both\n";
      return kExitUsage;
    }
    if (const int rc = launch_scaling_runs(in); rc != kExitOk) return rc;
  }
  if (in.runs.size() < 2) {
    std::cerr << "stallscope scaling: needs at least two runs (at different rank counts)\n";
    return kExitUsage;
  }
  std::vector<analyzer::Report> reports;
  analyzer::AnalyzeOptions opt;
  opt.rank_threads = in.jobs;
  for (const auto& run : in.runs) {
    note_skipped_inputs("scaling", {run});
    reports.push_back(analyzer::analyze_paths({run}, opt));
    for (const auto& e : reports.back().errors) std::cerr << "stallscope scaling: " << e << "\n";
    if (reports.back().ranks.empty()) return kExitInput;
  }
  const analyzer::ScalingStudy study = analyzer::scaling_study(reports, in.runs);
  if (in.json)
    analyzer::write_scaling_json(std::cout, study);
  else
    analyzer::write_scaling_text(std::cout, study);
  if (!in.html.empty()) {
    const std::string err = write_output(in.html, OutputOwner::kUser, [&](std::ostream& out) {
      analyzer::write_scaling_html(out, study);
    });
    if (!err.empty()) {
      std::cerr << "stallscope scaling: --html: cannot write " << err << "\n";
      return kExitInput;
    }
  }
  return study.points.size() >= 2 ? kExitOk : kExitInput;
}

}  // namespace

Command add_scaling_command(CLI::App& parent) {
  auto opt = std::make_shared<ScalingArgs>();
  CLI::App* sub =
      parent.add_subcommand("scaling", "Scaling efficiency across runs at different rank counts");
  sub->add_option("RUN", opt->runs, "Run directories of one workload at different rank counts");
  sub->add_option("--launch", opt->launch,
                  "Record the runs: a command with {n} for the rank count (and {steps}), e.g. "
                  "'mpirun -np {n} trainer --data /d'");
  sub->add_option("--ranks", opt->ranks, "Rank counts to launch (with --launch)")->delimiter(',');
  sub->add_option("--steps", opt->steps,
                  "Steps per launched run: replaces {steps}, else appended as --steps K");
  sub->add_option("--out", opt->out, "Where launched runs go (default stallscope-scaling)");
  sub->add_flag("--json", opt->json, "Print JSON (schema stallscope.scaling)");
  sub->add_option("--html", opt->html, "Also write the HTML page (efficiency plot) here");
  sub->add_option("-j,--jobs", opt->jobs, "Ranks analyzed at once (default 0: one per core)")
      ->type_name("N")
      ->check(CLI::Range(0, 4096));
  return {sub, [opt] { return run_scaling(*opt); }};
}

}  // namespace stallscope::cli
