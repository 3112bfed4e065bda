// `stallscope diff RUN_A RUN_B [--json]`: per-part deltas between two runs of
// the same workload, and whether each remedy run A's report proposed
// delivered its predicted gain in run B. A run is a run directory, a trace
// file, or a JSON report saved with `stallscope report --json`.
// `stallscope diff TUNE_DIR [--trial N]`: the same for each trial
// `stallscope tune` ran, against the trial whose report proposed it.
// `--html OUT.html` also writes the comparison as a page (with the trials'
// table for a tune directory).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

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
  int trial = -1;  // a tune directory: only this trial
  std::string html;  // also write the comparison as an HTML page here
};

// Reports kept alive for the HTML page's sections (which point into them).
using Kept = std::vector<std::unique_ptr<analyzer::Report>>;

bool write_diff_page(const DiffArgs& in, const std::string& title,
                     const std::vector<std::vector<std::string>>& table,
                     const std::vector<analyzer::DiffSection>& sections) {
  const std::string err = write_output(in.html, OutputOwner::kUser, [&](std::ostream& out) {
    analyzer::write_diff_html(out, title, table, sections);
  });
  if (err.empty()) return true;
  std::cerr << "stallscope diff: --html: cannot write " << err << "\n";
  return false;
}

std::string ms_text(const nlohmann::json& t, const char* key) {
  if (!t.contains(key) || !t[key].is_number()) return "";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", t[key].get<double>());
  return b;
}

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
  note_skipped_inputs("diff", {path});
  out = analyzer::analyze_paths({path}, {});
  for (const auto& e : out.errors) std::cerr << "stallscope diff: " << e << "\n";
  return !out.ranks.empty();
}

// A trial's run directory: the repeat's where it ran twice.
std::string trial_run(const nlohmann::json& t) {
  const auto& dirs = t.at("run_dirs");
  return dirs.empty() ? "" : dirs.back().get<std::string>();
}

int run_tune_diff(const DiffArgs& in) {
  namespace fs = std::filesystem;
  const fs::path file = fs::path(in.a) / "tune.json";
  std::string text;
  if (std::string error = read_input_file(file.string(), &text, kMaxReportJson); !error.empty()) {
    std::cerr << "stallscope diff: " << error << "\n";
    return kExitInput;
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("schema", "") != "stallscope.tune" ||
      !doc.contains("trials") || !doc["trials"].is_array()) {
    std::cerr << "stallscope diff: " << file.string() << ": not a stallscope tune record\n";
    return kExitInput;
  }
  const auto& trials = doc["trials"];
  bool shown = false;
  Kept kept;
  std::vector<analyzer::DiffSection> sections;
  std::vector<std::vector<std::string>> table = {
      {"trial", "setting", "step p50 ms", "spread ms", "predicted ms", "outcome"}};
  try {
    for (const auto& t : trials) {
      const int index = t.at("index").get<int>();
      const int base = t.at("based_on").get<int>();
      std::string sets;
      for (const auto& x : t.at("added"))
        sets.append(sets.empty() ? "" : " ").append("--set ").append(x.get<std::string>());
      std::string what = t.value("remedy_title", "");
      what.append(what.empty() || sets.empty() ? "" : ": ").append(sets);
      table.push_back({std::to_string(index), index == 0 ? "as is" : what, ms_text(t, "step_p50_ms"),
                       ms_text(t, "spread_ms"), ms_text(t, "predicted_step_ms"), t.value("outcome", "")});
      if (index == 0 || (in.trial >= 0 && index != in.trial)) continue;
      const std::string heading = "trial " + std::to_string(index) + " (" + what + ") against trial " +
                                  std::to_string(base) + ": " + t.value("outcome", "");
      std::cout << (shown ? "\n" : "") << heading << "\n";
      shown = true;
      analyzer::DiffSection section;
      section.heading = heading;
      if (t.value("outcome", "") == "setting failed") {
        section.note = "the setting failed: " + t.value("failure", "");
        std::cout << "  " << section.note << "\n";
        sections.push_back(std::move(section));
        continue;
      }
      if (base < 0 || size_t(base) >= trials.size()) continue;
      auto a = std::make_unique<analyzer::Report>(), b = std::make_unique<analyzer::Report>();
      if (!load_run(trial_run(trials[size_t(base)]), *a) || !load_run(trial_run(t), *b))
        return kExitInput;
      analyzer::DiffOptions o;
      o.json = in.json;
      o.tolerance = in.tolerance;
      o.applied = t.value("remedy_id", "");
      analyzer::write_diff(std::cout, *a, *b, o);
      section.a = a.get();
      section.b = b.get();
      section.opt = o;
      sections.push_back(std::move(section));
      kept.push_back(std::move(a));
      kept.push_back(std::move(b));
    }
  } catch (const nlohmann::json::exception& e) {
    std::cerr << "stallscope diff: " << file.string() << ": bad field: " << e.what() << "\n";
    return kExitInput;
  }
  if (!shown) {
    std::cerr << "stallscope diff: " << in.a
              << (in.trial >= 0 ? ": no such trial" : ": no trial after the first") << "\n";
    return kExitInput;
  }
  if (!in.html.empty() && !write_diff_page(in, "stallscope tune: " + in.a, table, sections)) return kExitInput;
  return kExitOk;
}

int run_diff(const DiffArgs& in) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(in.a) / "tune.json", ec)) {
    if (!in.b.empty()) {
      std::cerr << "stallscope diff: " << in.a
                << " is a tune directory: give it alone (with --trial N for one trial)\n";
      return kExitUsage;
    }
    return run_tune_diff(in);
  }
  if (in.b.empty()) {
    std::cerr << "stallscope diff: RUN_B is missing (only a tune directory is diffed alone)\n";
    return kExitUsage;
  }
  analyzer::Report a, b;
  if (!load_run(in.a, a) || !load_run(in.b, b)) return kExitInput;
  analyzer::DiffOptions o;
  o.json = in.json;
  o.tolerance = in.tolerance;
  o.applied = in.applied;
  analyzer::write_diff(std::cout, a, b, o);
  if (!in.html.empty()) {
    analyzer::DiffSection section;
    section.heading = in.a + " → " + in.b;
    section.a = &a;
    section.b = &b;
    section.opt = o;
    if (!write_diff_page(in, "stallscope diff", {}, {section})) return kExitInput;
  }
  return kExitOk;
}

}  // namespace

Command add_diff_command(CLI::App& parent) {
  auto opt = std::make_shared<DiffArgs>();
  CLI::App* sub = parent.add_subcommand("diff", "Compare two runs: per-part deltas, remedies delivered");
  sub->add_option("RUN_A", opt->a,
                  "Run before the change (directory, .sst, or report .json), or a "
                  "`stallscope tune` directory: each trial against the one it built on")
      ->required();
  sub->add_option("RUN_B", opt->b, "Run after the change");
  sub->add_option("--trial", opt->trial, "A tune directory: only this trial")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--json", opt->json, "Print JSON (schema stallscope.diff)");
  sub->add_option("--html", opt->html,
                  "Also write the comparison as a self-contained HTML page here (each part before and "
                  "after, each remedy's predicted gain against the measured one)")
      ->type_name("OUT.html");
  sub->add_option("--tolerance", opt->tolerance, "Share of a predicted gain that may be missing (0.25)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--applied", opt->applied,
                  "The remedy applied between the runs (its id, e.g. pinned_memory); the others "
                  "are shown as not applied");
  return {sub, [opt] { return run_diff(*opt); }};
}

}  // namespace stallscope::cli
