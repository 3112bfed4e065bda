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

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The reader's words for a file without its End chunk: its own warning and
// the analyzer's.
bool cut_warning_of(const std::string& w, const std::string& file_prefix) {
  return starts_with(w, file_prefix) && (w.find(": no End chunk") != std::string::npos ||
                                         w.find(": truncated (cut or") != std::string::npos);
}

// After the job's command ended: a file whose process still runs (a
// descendant the job left behind, e.g. Python's resource tracker) is being
// written, not cut. Its cut warnings become one that says so, and it leaves
// the rank's count of cut files.
void word_open_files(analyzer::Report& rep, const std::string& run_dir) {
  for (const auto& p : read_progress(run_dir)) {
    if (p.ended) continue;
    // "<base>.sst", or a ring's "<base>.segN.sst".
    const std::string file = run_dir + "/" + p.base + ".";
    for (auto& r : rep.ranks) {
      const size_t before = r.warnings.size();
      std::string path;
      std::erase_if(r.warnings, [&](const std::string& w) {
        if (!cut_warning_of(w, file)) return false;
        if (path.empty()) path = w.substr(0, w.find(": "));
        return true;
      });
      if (r.warnings.size() == before) continue;
      if (r.drops.files_truncated > 0) --r.drops.files_truncated;
      r.warnings.push_back(path + ": still being written (process " + std::to_string(p.pid) +
                           " was still running when the report was made, after the job's "
                           "command ended): analyzed up to its last flush");
    }
  }
}

}  // namespace

int write_run_report(const std::string& run_dir, const std::string& format,
                     const std::string& note,
                     const std::vector<analyzer::Expectation>& expected, bool job_ended) {
  analyzer::Report rep;
  note_skipped_inputs("run", {run_dir});
  try {
    rep = analyzer::analyze_paths({run_dir}, analyzer::AnalyzeOptions{});
  } catch (const std::exception& e) {
    std::cerr << "stallscope run: report: " << e.what() << "\n";
    return kExitInput;
  }
  if (!note.empty()) rep.warnings.push_back(note);
  if (job_ended) word_open_files(rep, run_dir);
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
