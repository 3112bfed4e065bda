// `stallscope export --chrome OUT.json PATH... [--from T] [--to T] [--steps A:B]
// [--no-attribution]`: Chrome trace-event JSON for ui.perfetto.dev, written
// through a temporary file that replaces OUT.json only when complete. When
// the analyzer finds steps, each rank gains a process "attribution rank N":
// one thread per part, each step's parts laid end to end from its start.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include "cli_files.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/chrome_export.hpp"
#include "stallscope/file_summary.hpp"  // format_bytes

namespace stallscope::cli {

namespace {

struct ExportOptions {
  std::string chrome;
  std::vector<std::string> paths;
  std::string from, to, steps;
  bool no_attribution = false;
};

// Flags whose text CLI11 cannot check: false after printing what was wrong.
bool parse_window(const ExportOptions& in, reader::ChromeExportOptions& out) {
  std::string error;
  auto bad = [&](const char* flag) {
    std::cerr << "stallscope export: " << flag << ": " << error << "\n"
              << "Run with --help for more information.\n";
    return false;
  };
  reader::TimeBound b;
  if (!in.from.empty()) {
    if (!reader::parse_time_bound(in.from, b, &error)) return bad("--from");
    out.from = b;
  }
  if (!in.to.empty()) {
    if (!reader::parse_time_bound(in.to, b, &error)) return bad("--to");
    out.to = b;
  }
  if (!in.steps.empty()) {
    std::pair<uint64_t, uint64_t> range;
    if (!reader::parse_step_range(in.steps, range, &error)) return bad("--steps");
    out.steps = range;
  }
  return true;
}

// The attribution track of one rank: the parts of each step, in the
// analyzer's priority order, laid end to end from the step's start.
void attribution_track(reader::ChromeEventSink& sink, const analyzer::RankReport& r) {
  const std::string who = r.rank >= 0 ? "rank " + std::to_string(r.rank) : r.host;
  const uint32_t pid = sink.add_process("attribution " + who, r.rank >= 0 ? r.rank : 0);
  std::array<bool, analyzer::kPartCount> named{};
  for (const auto& s : r.steps) {
    int64_t t = s.start_ns;
    for (size_t p = 0; p < analyzer::kPartCount; ++p) {
      const int64_t ns = s.parts[p];
      if (ns <= 0) continue;
      const auto label = analyzer::part_label(static_cast<analyzer::Part>(p));
      const uint32_t tid = static_cast<uint32_t>(p) + 1;
      if (!named[p]) sink.thread(pid, tid, label);
      const reader::ChromeEventSink::Arg args[] = {{"step", double(s.index)},
                                                   {"ms", double(ns) / 1e6}};
      named[p] |= sink.slice(pid, tid, "attribution", label, t, ns, args);
      t += ns;
    }
  }
}

// Analyzes `files` for the attribution track; empty when they hold no steps
// (the export itself reports unreadable files).
std::function<void(reader::ChromeEventSink&)> attribution_events(const std::vector<std::string>& files) {
  auto rep = std::make_shared<analyzer::Report>();
  try {
    *rep = analyzer::analyze_paths(files, {});
  } catch (const std::exception& e) {
    std::cerr << "stallscope export: warning: no attribution track: " << e.what() << "\n";
    return {};
  }
  if (std::none_of(rep->ranks.begin(), rep->ranks.end(), [](const auto& r) { return !r.steps.empty(); }))
    return {};
  return [rep](reader::ChromeEventSink& sink) {
    for (const auto& r : rep->ranks)
      if (!r.steps.empty()) attribution_track(sink, r);
  };
}

void report(const reader::ChromeExportResult& res, const std::string& dest) {
  show_progress(1, 1, "");  // clear the progress line
  for (const auto& w : res.warnings)
    std::cerr << "stallscope export: warning: " << reader::terminal_safe(w) << "\n";
  for (const auto& e : res.errors)
    std::cerr << "stallscope export: error: " << reader::terminal_safe(e) << "\n";
  std::cerr << "stallscope export: wrote " << res.events << " trace events ("
            << reader::format_bytes(res.bytes) << ") to " << dest << "\n";
}

int export_to_stdout(std::vector<reader::TraceReader>& readers,
                     const reader::ChromeExportOptions& opt) {
  const auto res = reader::export_chrome(readers, std::cout, opt);
  std::cout.flush();
  report(res, "standard output");
  return res.ok() && std::cout.good() ? kExitOk : kExitInput;
}

int export_to_file(std::vector<reader::TraceReader>& readers,
                   const reader::ChromeExportOptions& opt, const std::string& dest) {
  reader::ChromeExportResult res;
  const std::string err = write_output(dest, OutputOwner::kUser, [&](std::ostream& out) {
    res = reader::export_chrome(readers, out, opt);
  });
  if (!err.empty()) {
    std::cerr << "stallscope export: cannot write " << err << "\n";
    return kExitInput;
  }
  report(res, dest);
  return res.ok() ? kExitOk : kExitInput;
}

int run_export(const ExportOptions& in) {
  reader::ChromeExportOptions opt;
  if (!parse_window(in, opt)) return kExitUsage;
  opt.progress = show_progress;
  bool failed = false;
  const auto files = expand_inputs("export", in.paths, &failed);
  if (failed || files.empty()) return kExitInput;
  if (!in.no_attribution) opt.extra_events = attribution_events(files);
  std::vector<reader::TraceReader> readers;
  readers.reserve(files.size());
  for (const auto& f : files) readers.emplace_back(f);
  return in.chrome == "-" ? export_to_stdout(readers, opt)
                          : export_to_file(readers, opt, in.chrome);
}

}  // namespace

Command add_export_command(CLI::App& parent) {
  auto opt = std::make_shared<ExportOptions>();
  CLI::App* sub = parent.add_subcommand("export", "Convert traces for other viewers (Chrome JSON)");
  sub->add_option("--chrome", opt->chrome,
                  "Write Chrome trace-event JSON here ('-' = standard output); open it in "
                  "ui.perfetto.dev")
      ->required()
      ->type_name("OUT.json");
  sub->add_option("PATH", opt->paths, "Trace files (.sst) or run directories")
      ->required()
      ->type_name("PATH");
  sub->add_option("--from", opt->from,
                  "Keep events ending at or after this time: ns after the trace start, or with a "
                  "unit (250us, 1.5ms, 2s); '@' prefix = absolute CLOCK_MONOTONIC ns")
      ->type_name("TIME");
  sub->add_option("--to", opt->to, "Keep events starting at or before this time (as --from)")
      ->type_name("TIME");
  sub->add_option("--steps", opt->steps,
                  "Keep the window of steps A..B (inclusive; from step events), e.g. 100:110")
      ->type_name("A:B");
  sub->add_flag("--no-attribution", opt->no_attribution,
               "Leave out the analyzer's attribution tracks (one process per rank, one thread "
               "per part of each step)");
  sub->footer(
      "The trace start is the earliest recorder start among the files; JSON timestamps count\n"
      "from it. A warning is printed when the output would pass ~1 GiB, about what a browser\n"
      "can open: narrow it with --from/--to or --steps.\n"
      "Exit status (as info and report): 0 written (cut files only warn), 1 an input missing\n"
      "or unreadable, even in part (the readable part is still written), or the output\n"
      "unwritable, 2 usage error.");
  return {sub, [opt] { return run_export(*opt); }};
}

}  // namespace stallscope::cli
