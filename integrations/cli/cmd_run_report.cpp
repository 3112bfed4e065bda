// The report of `stallscope run`: analyzed from the run directory as soon as
// the capture window is on disk (the trainer goes on), saved next to the
// traces and printed on stderr, so the trainer's own stdout stays clean for
// whatever reads it.
#include <iostream>
#include <sstream>

#include "cli_files.hpp"
#include "cmd_run.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"
#include "stallscope/file_summary.hpp"  // terminal_safe

namespace stallscope::cli::run {
namespace {

// RUN/report.* are stallscope's own: a FIFO or device planted there is
// refused, never opened.
bool save(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string err = write_output(path, OutputOwner::kStallscope, write);
  if (!err.empty()) std::cerr << "stallscope run: cannot write " << err << "\n";
  return err.empty();
}

}  // namespace

int write_run_report(const std::string& run_dir, const std::string& format,
                     const std::string& note,
                     const std::vector<analyzer::Expectation>& expected) {
  analyzer::Report rep;
  note_skipped_inputs("run", {run_dir});
  try {
    rep = analyzer::analyze_paths({run_dir}, analyzer::AnalyzeOptions{});
  } catch (const std::exception& e) {
    std::cerr << "stallscope run: report: " << e.what() << "\n";
    return kExitInput;
  }
  if (!note.empty()) rep.warnings.push_back(note);
  for (const auto& e : rep.errors)
    std::cerr << "stallscope run: report: " << reader::terminal_safe(e) << "\n";
  if (rep.ranks.empty()) {
    std::cerr << "stallscope run: no trace to report in " << run_dir << "\n";
    return kExitInput;
  }
  const std::string base = run_dir + "/report";
  bool ok = save(base + ".txt", [&](std::ostream& o) { analyzer::write_text(o, rep, {}); });
  ok = save(base + ".json", [&](std::ostream& o) { analyzer::write_json(o, rep); }) && ok;
  if (format == "html")
    ok = save(base + ".html", [&](std::ostream& o) { analyzer::write_html(o, rep); }) && ok;
  std::ostringstream text;
  if (format == "json")
    analyzer::write_json(text, rep);
  else
    analyzer::write_text(text, rep, {});
  std::cerr << "\n" << text.str();
  if (format == "html") std::cerr << "stallscope run: HTML report: " << base << ".html\n";
  std::cerr << "stallscope run: report saved in " << base << ".txt and " << base << ".json\n"
            << std::flush;
  if (!ok) return kExitInput;
  return report_expectations("run", rep, expected) ? kExitOk : kExitExpectation;
}

}  // namespace stallscope::cli::run
