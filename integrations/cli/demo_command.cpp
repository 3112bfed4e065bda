// `stallscope demo`: the whole story in one command. Generates a small
// dataset, runs the sample trainer with a deliberately mis-tuned loader
// (pageable staging memory), prints the report, applies the top remedy, runs
// again and prints before → after with `stallscope diff`'s verdict. Leaves
// the run directories and HTML reports for the user to open.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "demo_knobs.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"

namespace stallscope::cli {

namespace {

namespace fs = std::filesystem;

struct DemoArgs {
  std::string dir, samples_dir;
  int steps = 60;
  bool keep_going = false;
};

// gen_dataset and trainer: $STALLSCOPE_SAMPLES_DIR, else next to this
// program's build (../samples, ./), else the installed libexec folder.
std::string find_tool(const DemoArgs& a, const std::string& name) {
  const fs::path self = fs::read_symlink("/proc/self/exe").parent_path();
  std::vector<fs::path> dirs;
  if (!a.samples_dir.empty()) dirs.emplace_back(a.samples_dir);
  if (const char* e = std::getenv("STALLSCOPE_SAMPLES_DIR")) dirs.emplace_back(e);
  for (const char* rel : {"../samples", ".", "../libexec/stallscope"}) dirs.push_back(self / rel);
  for (const auto& d : dirs)
    if (fs::exists(d / name)) return fs::weakly_canonical(d / name).string();
  return "";
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Runs a command with its output appended to `log`; true on exit status 0.
bool run_logged(const std::string& cmd, const std::string& log) {
  const int rc = shell(cmd + " >>" + quote(log) + " 2>&1");
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

std::vector<std::string> mis_tuned_flags(int steps) {
  return {"--steps=" + std::to_string(steps), "--compute-ms=8", "--sample-bytes=262144",
          "--loader-pinned=off", "--loader-pageable-gbps=0.4", "--loader-pinned-gbps=8",
          "--loader-workers=2"};
}

bool run_trainer(const std::string& trainer, const std::string& data, const std::vector<std::string>& flags,
                 const std::string& out, const std::string& log) {
  std::string cmd = "STALLSCOPE_OUT=" + quote(out) + " STALLSCOPE_QUIET=on " + quote(trainer) +
                    " --quiet --data " + quote(data) + " --summary-json " + quote(out + ".summary.json");
  for (const auto& f : flags) cmd += " " + quote(f);
  return run_logged(cmd, log);
}

analyzer::Report analyze(const std::string& run, const std::string& html) {
  analyzer::Report r = analyzer::analyze_paths({run}, {});
  std::ofstream h(html);
  analyzer::write_html(h, r);
  std::ofstream j(run + ".report.json");
  analyzer::write_json(j, r);
  return r;
}

const analyzer::Remedy* top_remedy(const analyzer::Report& r) {
  if (r.ranks.empty()) return nullptr;
  for (const auto& m : r.ranks[0].remedies)
    if (m.id != "healthy") return &m;
  return nullptr;
}

double input_of(const analyzer::Remedy& m, const char* name) {
  for (const auto& n : m.inputs)
    if (n.name == name) return n.value;
  return -1;
}

nlohmann::json summary_of(const std::string& run) {
  std::ifstream f(run + ".summary.json");
  return nlohmann::json::parse(f, nullptr, false);
}

void print_part_row(const char* label, double a, double b) {
  std::printf("  %-22s %9.2f ms  ->  %9.2f ms\n", label, a, b);
}

void print_before_after(const analyzer::Report& a, const analyzer::Report& b, const std::string& ra,
                        const std::string& rb) {
  const auto sa = summary_of(ra), sb = summary_of(rb);
  std::printf("\n== Before -> after =============================================\n");
  print_part_row("step time (mean)", sa.value("mean_ms", 0.0), sb.value("mean_ms", 0.0));
  std::printf("  %-22s %9.0f /s  ->  %9.0f /s  (samples per second)\n", "throughput",
              sa.value("samples_per_s", 0.0), sb.value("samples_per_s", 0.0));
  std::printf("  parts per step (mean over steady steps):\n");
  const auto& pa = a.ranks[0].parts;
  const auto& pb = b.ranks[0].parts;
  for (size_t i = 0; i < pa.size(); ++i) {
    const double x = pa[i].total_ns / 1e6 / std::max<double>(1, a.ranks[0].steady_steps);
    const double y = pb[i].total_ns / 1e6 / std::max<double>(1, b.ranks[0].steady_steps);
    if (x >= 0.05 || y >= 0.05) print_part_row(("  " + std::string(analyzer::part_label(static_cast<analyzer::Part>(i)))).c_str(), x, y);
  }
}

int demo_runs(const DemoArgs& a, const std::string& dir, const std::string& trainer, const std::string& data,
              const std::string& log) {
  const std::vector<std::string> before_flags = mis_tuned_flags(a.steps);
  const std::string ra = dir + "/run-before", rb = dir + "/run-after";
  std::printf("2. Training %d steps with a mis-tuned loader (batches staged in pageable memory) ...\n", a.steps);
  std::printf("   trainer");
  for (const auto& f : before_flags) std::printf(" %s", f.c_str());
  std::printf("\n\n");
  if (!run_trainer(trainer, data, before_flags, ra, log))
    return std::cerr << "stallscope demo: the trainer failed, see " << log << "\n", kExitInput;
  const analyzer::Report before = analyze(ra, dir + "/report-before.html");
  if (before.ranks.empty()) return std::cerr << "stallscope demo: no trace in " << ra << "\n", kExitInput;
  std::printf("3. stallscope report %s\n\n", ra.c_str());
  analyzer::write_text(std::cout, before, {});
  const analyzer::Remedy* top = top_remedy(before);
  const trainer::KnobChange k = top ? trainer::knob_for_remedy(top->id, [&](const char* n) { return input_of(*top, n); })
                                    : trainer::KnobChange{};
  if (!k.applicable()) {
    std::printf("\nNo remedy the sample trainer can apply was proposed; stopping here.\n");
    return kExitOk;
  }
  std::printf("\n4. Applying the top remedy, \"%s\": %s (%s%s) and training again ...\n\n", top->title.c_str(),
              k.note.c_str(), k.add.empty() ? "without " : "", k.add.empty() ? k.remove.c_str() : k.add.c_str());
  if (!run_trainer(trainer, data, trainer::apply_knob(before_flags, k), rb, log))
    return std::cerr << "stallscope demo: the trainer failed, see " << log << "\n", kExitInput;
  const analyzer::Report after = analyze(rb, dir + "/report-after.html");
  if (after.ranks.empty()) return std::cerr << "stallscope demo: no trace in " << rb << "\n", kExitInput;
  print_before_after(before, after, ra, rb);
  std::printf("\n5. stallscope diff --applied %s %s %s\n\n", top->id.c_str(), ra.c_str(), rb.c_str());
  analyzer::DiffOptions diff;
  diff.applied = top->id;
  analyzer::write_diff(std::cout, before, after, diff);
  std::printf("\nOpen these to look closer:\n  traces:       %s  %s\n  HTML reports: %s/report-before.html  %s/report-after.html\n"
              "  try:          stallscope report %s\n", ra.c_str(), rb.c_str(), dir.c_str(), dir.c_str(), ra.c_str());
  return kExitOk;
}

int run_demo(const DemoArgs& a) {
  const std::string gen = find_tool(a, "gen_dataset"), trainer = find_tool(a, "trainer");
  if (gen.empty() || trainer.empty()) {
    std::cerr << "stallscope demo: cannot find the sample programs (gen_dataset, trainer); build them "
                 "(cmake --build build) or pass --samples-dir DIR\n";
    return kExitInput;
  }
  std::string dir = a.dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/stallscope-demo-XXXXXX";
    if (!mkdtemp(tmpl)) return std::perror("stallscope demo: mkdtemp"), kExitInput;
    dir = tmpl;
  }
  fs::create_directories(dir);
  const std::string log = dir + "/demo.log", data = dir + "/dataset";
  std::printf("stallscope demo — a training job with a badly configured data loader, diagnosed and fixed.\n"
              "Working in %s (commands' output: demo.log).\n\n", dir.c_str());
  std::printf("1. Generating a dataset: 1500 zstd-compressed samples of ~64 KiB ...\n");
  if (!run_logged(quote(gen) + " --quiet --out " + quote(data) + " --samples 1500 --size-kb 64", log))
    return std::cerr << "stallscope demo: gen_dataset failed, see " << log << "\n", kExitInput;
  return demo_runs(a, dir, trainer, data, log);
}

}  // namespace
}  // namespace stallscope::cli

namespace stallscope::cli {

Command add_demo_command(CLI::App& parent) {
  auto opt = std::make_shared<DemoArgs>();
  CLI::App* sub = parent.add_subcommand(
      "demo", "Run the sample trainer mis-tuned, show the report, apply the top remedy, compare");
  sub->add_option("--dir", opt->dir, "Where to put the dataset, traces and reports (default: a new /tmp dir)");
  sub->add_option("--samples-dir", opt->samples_dir, "Folder holding gen_dataset and trainer");
  sub->add_option("--steps", opt->steps, "Training steps per run (60)")->check(CLI::Range(10, 100000));
  return {sub, [opt] { return run_demo(*opt); }};
}

}  // namespace stallscope::cli
