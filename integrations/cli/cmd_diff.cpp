// `stallscope diff RUN_A RUN_B [--json]`: per-part deltas between two runs of
// the same workload, and whether each remedy run A's report proposed
// delivered its predicted gain in run B. A run is a run directory, a trace
// file, or a JSON report saved with `stallscope report --json`.
#include <iostream>
#include <memory>

#include "cli_files.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"

namespace stallscope::cli {

namespace {

// A report's JSON: a few MB for thousands of ranks.
constexpr size_t kMaxReportJson = size_t{256} << 20;

struct DiffArgs {
  std::string a, b;
  bool json = false;
  double tolerance = 0.25;
  std::string applied;
};

bool load_run(const std::string& path, analyzer::Report& out) {
  if (path.size() > 5 && path.ends_with(".json")) {
    std::string text;
    std::string error = read_input_file(path, &text, kMaxReportJson);
    if (!error.empty()) {
      std::cerr << "stallscope diff: " << error << "\n";
      return false;
    }
    if (!analyzer::read_json(text, out, &error)) {
      std::cerr << "stallscope diff: " << path << ": " << error << "\n";
      return false;
    }
    return true;
  }
  out = analyzer::analyze_paths({path}, {});
  for (const auto& e : out.errors) std::cerr << "stallscope diff: " << e << "\n";
  return !out.ranks.empty();
}

int run_diff(const DiffArgs& in) {
  analyzer::Report a, b;
  if (!load_run(in.a, a) || !load_run(in.b, b)) return kExitInput;
  analyzer::DiffOptions o;
  o.json = in.json;
  o.tolerance = in.tolerance;
  o.applied = in.applied;
  analyzer::write_diff(std::cout, a, b, o);
  return kExitOk;
}

}  // namespace

Command add_diff_command(CLI::App& parent) {
  auto opt = std::make_shared<DiffArgs>();
  CLI::App* sub = parent.add_subcommand("diff", "Compare two runs: per-part deltas, remedies delivered");
  sub->add_option("RUN_A", opt->a, "Run before the change (directory, .sst, or report .json)")->required();
  sub->add_option("RUN_B", opt->b, "Run after the change")->required();
  sub->add_flag("--json", opt->json, "Print JSON (schema stallscope.diff)");
  sub->add_option("--tolerance", opt->tolerance, "Share of a predicted gain that may be missing (0.25)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--applied", opt->applied,
                  "The remedy applied between the runs (its id, e.g. pinned_memory); the others "
                  "are shown as not applied");
  return {sub, [opt] { return run_diff(*opt); }};
}

}  // namespace stallscope::cli
