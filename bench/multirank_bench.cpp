// multirank_bench: merge + cross-rank analysis of a synthetic multi-rank run
// (tests/multirank/synth_files.hpp: 256 ranks × 2,000 steps on 32 hosts by
// default, wall clocks off by up to ±50 ms, drift up to ±20 ppm, jitter, one
// rank slowed by its storage), in the default mode of `stallscope report`
// (ranks analyzed in parallel, one thread per core: AnalyzeOptions::
// rank_threads = 0) and on one thread, each in its own child process so its
// peak RSS and CPU time (wait4) are its own. Files are written to /tmp (warm
// in the page cache when analyzed) and deleted afterwards.
//
//   build/bench/multirank_bench [--ranks 256] [--steps 2000] [--kernels 32] [--threads 0]
//                               [--keep DIR]
//
// A step holds a data wait, a storage read, --kernels compute kernels, the
// all-reduce and the update kernel (37 events by default, fewer than most
// real steps: per-step costs weigh more here than on real traces).
//
// events/s = trace events of all ranks ÷ wall time of the analysis (merge,
// per-rank attribution, clock alignment, straggler attribution). The target
// (≥ 20 M events/s overall) applies to the default mode; the one-thread
// figures (wall and per CPU-second) are printed beside it, with the
// parallel mode's speed-up over them. Memory per
// rank = (peak RSS − RSS of an idle child) ÷ ranks, also for the same run at
// half the steps: the difference per step is how memory grows with run
// length (the target: constant). Ends with RESULT lines
// ("RESULT <name> <value> <unit> target <op> <value> PASS|MISS").
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "multirank/synth_files.hpp"
#include "stallscope/analyzer/analyzer.hpp"

namespace {

namespace an = stallscope::analyzer;

struct Outcome {
  double wall_s = 0, cpu_s = 0, max_rss_mb = 0;
  double events = 0;
  int straggler = -1;
};

// Runs fn in a child; its numbers come back through a pipe, its rusage by wait4.
template <typename Fn>
Outcome in_child(Fn fn) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(2);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Outcome o = fn();
    const ssize_t n = write(fds[1], &o, sizeof o);
    _exit(n == static_cast<ssize_t>(sizeof o) ? 0 : 3);
  }
  close(fds[1]);
  Outcome o;
  const ssize_t n = read(fds[0], &o, sizeof o);
  close(fds[0]);
  int st = 0;
  rusage u{};
  wait4(pid, &st, 0, &u);
  if (n != static_cast<ssize_t>(sizeof o) || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "multirank_bench: child failed\n");
    std::exit(2);
  }
  o.cpu_s = double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
            double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  o.max_rss_mb = double(u.ru_maxrss) / 1024.0;
  return o;
}

Outcome analyze(const std::string& dir, size_t threads) {
  return in_child([&] {
    an::AnalyzeOptions opt;
    opt.rank_threads = threads;
    // The engine trims intervals older than the lineage horizon (60 s) until
    // the step source is decided (after decide_events events): a sparse 80 s
    // run would lose its first 20 s. Decide within the first seconds instead.
    opt.decide_events = size_t{1} << 14;
    const auto t0 = std::chrono::steady_clock::now();
    const an::Report rep = an::analyze_paths({dir}, opt);
    Outcome o;
    o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& r : rep.ranks) o.events += double(r.events);
    if (rep.cross.stragglers.size() == 1)
      o.straggler = static_cast<int>(rep.cross.stragglers[0].rank);
    const std::string label = threads == 0 ? "one per core" : std::to_string(threads);
    std::printf("rank threads %s: %s\nclocks: %s\n", label.c_str(), rep.cross.summary.c_str(),
                rep.cross.clock.note.c_str());
    std::fflush(stdout);
    return o;
  });
}

bool result(const char* name, double v, const char* unit, const char* op, double target) {
  const bool pass = std::strcmp(op, ">=") == 0   ? v >= target
                    : std::strcmp(op, "==") == 0 ? v == target
                                                 : v <= target;
  std::printf("RESULT %s %.4g %s target %s %g %s\n", name, v, unit, op, target,
              pass ? "PASS" : "MISS");
  return pass;
}

size_t flag(int argc, char** argv, const char* name, size_t def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  stallscope::testing::SynthFilesSpec s;
  s.ranks = flag(argc, argv, "--ranks", 256);
  s.steps = flag(argc, argv, "--steps", 2000);
  s.kernels_per_step = flag(argc, argv, "--kernels", 32);
  s.straggler = static_cast<int64_t>(s.ranks / 3);
  // Ranks analyzed at once in the default mode: 0 is one per core, as
  // `stallscope report` does unless told otherwise (--jobs).
  const size_t threads = flag(argc, argv, "--threads", 0);
  const size_t cores = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<size_t>(CPU_COUNT(&set)) : 1;
  }();
  const size_t par_threads = threads == 0 ? cores : threads;
  // --keep DIR: write the traces there and leave them (to analyze them again).
  std::string keep;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--keep") == 0) keep = argv[i + 1];
  const std::string dir =
      keep.empty() ? "/tmp/stallscope-multirank-bench-" + std::to_string(getpid()) : keep;
  std::filesystem::create_directories(dir);
  std::fflush(stdout);  // children inherit the buffer
  const auto g0 = std::chrono::steady_clock::now();
  const stallscope::testing::SynthFiles gen(s);
  gen.write_all(dir);
  std::printf("generated %zu ranks x %zu steps (%zu events a step, %zu a rank) in %.1f s\n",
              s.ranks, s.steps, gen.events_per_step(), gen.events_per_rank(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count());
  std::fflush(stdout);
  const Outcome idle = in_child([] { return Outcome{}; });
  const Outcome seq = analyze(dir, 1);
  const Outcome par = analyze(dir, threads);
  if (keep.empty()) std::filesystem::remove_all(dir);
  // The same run at half the length, analyzed the same way: how memory per
  // rank grows with run length.
  stallscope::testing::SynthFilesSpec half_spec = s;
  half_spec.steps = s.steps / 2;
  const std::string half_dir = dir + "-half";
  std::filesystem::create_directories(half_dir);
  stallscope::testing::SynthFiles(half_spec).write_all(half_dir);
  const Outcome half = analyze(half_dir, 1);
  std::filesystem::remove_all(half_dir);
  const double per_rank_kb = (seq.max_rss_mb - idle.max_rss_mb) * 1024.0 / double(s.ranks);
  const double half_kb = (half.max_rss_mb - idle.max_rss_mb) * 1024.0 / double(s.ranks);
  const double growth_b_per_step =
      (per_rank_kb - half_kb) * 1024.0 / double(s.steps - half_spec.steps);
  std::printf("one thread: %.2f s wall, %.2f s CPU, peak RSS %.1f MB (idle child %.1f MB)\n",
              seq.wall_s, seq.cpu_s, seq.max_rss_mb, idle.max_rss_mb);
  std::printf("default mode (%zu rank threads, %zu cores): %.2f s wall, %.2f s CPU, "
              "peak RSS %.1f MB; speed-up over one thread %.2fx\n",
              par_threads, cores, par.wall_s, par.cpu_s, par.max_rss_mb, seq.wall_s / par.wall_s);
  std::printf("memory per rank: %.0f KB for %zu steps (%.0f B per step); %.0f KB for %zu steps: "
              "grows %.0f B per step of run length\n",
              per_rank_kb, s.steps, per_rank_kb * 1024.0 / double(s.steps), half_kb,
              half_spec.steps, growth_b_per_step);
  bool ok = true;
  // The target, overall: merge + analysis as `stallscope report` runs it.
  ok &= result("multirank_events_per_s", par.events / par.wall_s, "events/s", ">=", 20e6);
  // One thread, for reference (no target of its own): what one core does.
  ok &= result("multirank_one_thread_events_per_s", seq.events / seq.wall_s, "events/s", ">=", 0);
  ok &= result("multirank_one_thread_events_per_cpu_s", seq.events / seq.cpu_s, "events/s", ">=",
               0);
  ok &= result("multirank_parallel_speedup", seq.wall_s / par.wall_s, "x", ">=",
               cores > 1 ? 1.2 : 0);
  ok &= result("multirank_mem_per_rank", per_rank_kb, "KB", "<=", 128);
  // Constant in run length, allowing for the RSS measurement's noise.
  ok &= result("multirank_mem_growth_per_step", growth_b_per_step, "B/step", "<=", 16);
  ok &=
      result("multirank_straggler_found",
             seq.straggler == s.straggler && par.straggler == s.straggler ? 1 : 0, "bool", "==", 1);
  return ok ? 0 : 1;
}
