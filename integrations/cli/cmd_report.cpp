// `stallscope report PATH... [--json] [--html OUT.html] [--color] [--step-pattern RE] [--lag S]
// [--jobs N] [--expect 'METRIC<VALUE%' ...]`:
// where each step's time goes and what to change (docs/report-guide.md).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli_files.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"
#include "stallscope/file_summary.hpp"  // terminal_safe

namespace stallscope::cli {

namespace {

struct ReportOptions {
  std::vector<std::string> paths;
  bool json = false;
  std::string html;
  bool color = false, no_color = false;
  std::string step_pattern;
  double lag_s = 0;  // 0: adaptive
  size_t jobs = 0;   // ranks analyzed at once (0: one per core)
  uint64_t max_json_mb = 2048;
  std::vector<std::string> expect;  // --expect, as given
  std::string headspace;            // --headspace RUN: a `stallscope run --headspace` run
};

// A report's JSON: a few MB for thousands of ranks.
constexpr size_t kMaxReportJson = size_t{256} << 20;

// The headspace run (a run directory, trace files, or its report.json).
bool load_headspace(const std::string& path, analyzer::Report* out) {
  if (path.size() > 5 && path.ends_with(".json")) {
    std::string text;
    std::string error = read_input_file(path, &text, kMaxReportJson);
    if (error.empty() && !analyzer::read_json(text, *out, &error)) error = path + ": " + error;
    if (!error.empty()) {
      std::cerr << "stallscope report: --headspace: " << error << "\n";
      return false;
    }
  } else {
    *out = analyzer::analyze_paths({path}, {});
    for (const auto& e : out->errors)
      std::cerr << "stallscope report: --headspace: " << reader::terminal_safe(e) << "\n";
  }
  if (out->ranks.empty() || out->ranks.front().steady_steps == 0) {
    std::cerr << "stallscope report: --headspace " << path << ": no steady step to measure\n";
    return false;
  }
  if (!out->ranks.front().headspace.replayed)
    std::cerr << "stallscope report: --headspace " << path
              << ": not a `stallscope run --headspace` run (no batch was replayed there); its "
                 "step is taken as the ceiling all the same\n";
  return true;
}

void show_progress(uint64_t done, uint64_t total) {
  std::fprintf(stderr, "\rstallscope report: %llu / %llu MiB", static_cast<unsigned long long>(done >> 20),
               static_cast<unsigned long long>(total >> 20));
  if (done >= total) std::fputc('\n', stderr);
}

bool write_html_file(const analyzer::Report& rep, const std::string& dest) {
  const std::string err = write_output(dest, OutputOwner::kUser,
                                       [&](std::ostream& out) { analyzer::write_html(out, rep); });
  if (err.empty()) return true;
  std::cerr << "stallscope report: --html: cannot write " << err << "\n";
  return false;
}

int run_report(const ReportOptions& in) {
  std::vector<analyzer::Expectation> expected;
  if (!parse_expectations("report", in.expect, &expected)) return kExitUsage;
  analyzer::AnalyzeOptions opt;
  if (!in.step_pattern.empty()) opt.step_pattern = in.step_pattern;
  if (in.lag_s > 0) {
    opt.lag_ns = static_cast<int64_t>(in.lag_s * 1e9);
    opt.adaptive_lag = false;
  }
  opt.rank_threads = in.jobs;
  opt.max_json_bytes = in.max_json_mb << 20;
  if (::isatty(2)) opt.progress = show_progress;
  analyzer::Report rep;
  note_skipped_inputs("report", in.paths);
  try {
    rep = analyzer::analyze_paths(in.paths, opt);
  } catch (const analyzer::AnalyzeError& e) {
    std::cerr << "stallscope report: " << e.what() << "\n";
    return kExitUsage;
  }
  // Errors go to stderr (scripts read stdout); the report lists them too.
  for (const auto& e : rep.errors)
    std::cerr << "stallscope report: error: " << reader::terminal_safe(e) << "\n";
  if (rep.ranks.empty()) return kExitInput;  // nothing readable: no empty report
  if (!in.headspace.empty()) {
    analyzer::Report h;
    if (!load_headspace(in.headspace, &h)) return kExitInput;
    analyzer::apply_headspace(rep, h, in.headspace);
  }
  if (in.json) {
    analyzer::write_json(std::cout, rep);
  } else {
    analyzer::TextOptions t;
    t.color = in.color || (!in.no_color && ::isatty(1));
    analyzer::write_text(std::cout, rep, t);
  }
  if (!in.html.empty() && !write_html_file(rep, in.html)) return kExitInput;
  // As info and export: a file unreadable from an offset on is reported up
  // to there, and the exit status says the input was damaged.
  size_t damaged = 0;
  for (const auto& r : rep.ranks) damaged += r.drops.files_error;
  if (damaged > 0)
    std::cerr << "stallscope report: " << damaged
              << " file(s) unreadable from an offset on; the report covers what comes before "
                 "(its warnings name each file and offset)\n";
  if (rep.ranks.empty() || !rep.errors.empty() || damaged > 0) return kExitInput;
  return report_expectations("report", rep, expected) ? kExitOk : kExitExpectation;
}

}  // namespace

Command add_report_command(CLI::App& parent) {
  auto opt = std::make_shared<ReportOptions>();
  CLI::App* sub = parent.add_subcommand("report", "Where each step's time goes, and what to change");
  sub->add_option("PATH", opt->paths, "Trace files (.sst) or run directories")->required();
  sub->add_flag("--json", opt->json, "Print the JSON report (docs/report-schema.md) instead of text");
  sub->add_option("--html", opt->html, "Also write a self-contained HTML report here")->type_name("OUT.html");
  sub->add_flag("--color", opt->color, "Color the text report even when not a terminal");
  sub->add_flag("--no-color", opt->no_color, "Never color the text report");
  sub->add_option("--step-pattern", opt->step_pattern,
                  "Regex (case-insensitive) of range names that mark steps; default matches "
                  "ProfilerStep#N, step, train_step, iteration")
      ->type_name("REGEX");
  sub->add_option("--lag", opt->lag_s,
                  "Wait this long (trace time) for late events before attributing a step "
                  "(default: 4 x the lateness seen, 0.25 to 2 s)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(
          [](const std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(x >= 0.001 && x <= 3600))
              return "'" + v + "' is not a number of seconds from 0.001 to 3600";
            return {};
          },
          "SECONDS in [0.001, 3600]"));
  sub->add_option("-j,--jobs", opt->jobs,
                  "Ranks analyzed at once (default 0: one per core); the report is the same, "
                  "memory grows with it")
      ->type_name("N")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--max-json-mb", opt->max_json_mb,
                  "The most decompressed JSON one PyTorch profiler trace may have (default "
                  "2048; a .json.gz is checked while it inflates)")
      ->type_name("MIB")
      ->check(CLI::Range(1, 4095));
  sub->add_option("--headspace", opt->headspace,
                  "A `stallscope run --headspace` run of the same job (directory, .sst or report "
                  ".json): its step, with data for free, shown as the ceiling of every input "
                  "remedy")
      ->type_name("RUN");
  sub->add_option("--expect", opt->expect,
                  "A regression gate: METRIC OP VALUE, e.g. 'data_stall<5%', 'step<120ms', "
                  "'top_gain<5%' (repeatable; every rank must meet each; docs/cli.md)")
      ->type_name("EXPR");
  sub->footer(
      "Exit status (as info and export): 0 reported (cut files only warn), 1 an input missing\n"
      "or unreadable, even in part (the readable part is still reported), or an unwritable\n"
      "--html, 2 usage error, 3 an --expect expectation failed (each named on stderr).");
  return {sub, [opt] { return run_report(*opt); }};
}

}  // namespace stallscope::cli
