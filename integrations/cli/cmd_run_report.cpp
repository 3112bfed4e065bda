// The report of `stallscope run`: analyzed from the run directory as soon as
// the capture window is on disk (the trainer goes on), saved next to the
// traces and printed on stderr, so the trainer's own stdout stays clean for
// whatever reads it.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cmd_run.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"

namespace stallscope::cli::run {
namespace {

template <typename Write>
bool save(const std::string& path, Write&& write) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    write(out);
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int write_run_report(const std::string& run_dir, const std::string& format,
                     const std::string& note) {
  analyzer::Report rep;
  try {
    rep = analyzer::analyze_paths({run_dir}, analyzer::AnalyzeOptions{});
  } catch (const std::exception& e) {
    std::cerr << "stallscope run: report: " << e.what() << "\n";
    return kExitInput;
  }
  if (!note.empty()) rep.warnings.push_back(note);
  for (const auto& e : rep.errors) std::cerr << "stallscope run: report: " << e << "\n";
  if (rep.ranks.empty()) {
    std::cerr << "stallscope run: no trace to report in " << run_dir << "\n";
    return kExitInput;
  }
  const std::string base = run_dir + "/report";
  bool ok = save(base + ".txt", [&](std::ostream& o) { analyzer::write_text(o, rep, {}); });
  ok = save(base + ".json", [&](std::ostream& o) { analyzer::write_json(o, rep); }) && ok;
  if (format == "html")
    ok = save(base + ".html", [&](std::ostream& o) { analyzer::write_html(o, rep); }) && ok;
  if (!ok) std::cerr << "stallscope run: cannot write " << base << ".*\n";
  std::ostringstream text;
  if (format == "json")
    analyzer::write_json(text, rep);
  else
    analyzer::write_text(text, rep, {});
  std::cerr << "\n" << text.str();
  if (format == "html") std::cerr << "stallscope run: HTML report: " << base << ".html\n";
  std::cerr << "stallscope run: report saved in " << base << ".txt and " << base << ".json\n"
            << std::flush;
  return ok ? kExitOk : kExitInput;
}

}  // namespace stallscope::cli::run
