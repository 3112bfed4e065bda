// analyze_bench: the analyzer end to end (`stallscope report --json`: read,
// attribute, split, model, render JSON) on a generated trace of ~50 M events
// (8 host threads + a device stream, 10,000 steps, ~5,000 events a step),
// next to two references measured in the same run: reading the file's bytes
// and decoding its events with the reader alone (no analysis).
//
//   build/bench/analyze_bench [--steps 10000] [--small-steps 2000] [--repeat 3] [--cli PATH|none]
//   build/bench/analyze_bench gen FILE STEPS | analyze FILE | decode FILE
//                             | decode-analyzer-exts FILE | decode-views FILE   (profiling)
//                             | json FILE|DIR   (the report as JSON on stdout)
//
// Each measured run is its own child process, so its peak RSS (wait4) is its
// own. The runs on the large trace are repeated (--repeat) and the one that
// took the least CPU is kept, for every figure alike: on a shared machine the
// others measure the neighbours too (every run's CPU time is printed).
// Memory: the analysis at --steps and at --small-steps steps tells whether
// memory grows with the number of steps. With --cli (default: <build>/bin/stallscope
// when it exists) the timed run is `stallscope report --json FILE`, else the
// same work in-process (analyze_paths + write_json). Traces are written in
// format v1 directly (not through the recorder, to keep generation fast) to
// /tmp and deleted afterwards. Output ends with INFO lines (references) and
// RESULT lines ("RESULT <name> <value> <unit> target <op> <value> PASS|MISS").
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"
#include "stallscope/format.hpp"
#include "stallscope/reader.hpp"

namespace {

namespace f = stallscope::format;
using Clock = std::chrono::steady_clock;

template <typename T>
void put(std::vector<uint8_t>& b, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof v);
}

class Writer {
 public:
  explicit Writer(const std::string& path) : out_(path, std::ios::binary) {
    f::FileHeader h{};
    std::memcpy(h.magic, f::kMagic, 8);
    h.version_major = f::kVersionMajor;
    h.header_bytes = sizeof h;
    h.flags = f::kFileTicksAreNs;
    h.pid = 1000;
    h.tsc_hz = 1000000000;
    h.start = {1, 1, 1};
    h.crc32 = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(&h), offsetof(f::FileHeader, crc32)));
    out_.write(reinterpret_cast<const char*>(&h), sizeof h);
  }
  void chunk(f::ChunkType type, std::vector<uint8_t> p, int64_t now) {
    while (p.size() % 8) p.push_back(0);
    f::ChunkHeader c{f::kChunkMagic, uint16_t(type), 0, uint32_t(p.size()),
                     uint32_t(crc32(0, p.data(), uInt(p.size()))), seq_++,
                     {uint64_t(now), now, now}};
    out_.write(reinterpret_cast<const char*>(&c), sizeof c);
    out_.write(reinterpret_cast<const char*>(p.data()), long(p.size()));
  }

 private:
  std::ofstream out_;
  uint64_t seq_ = 0;
};

struct Gen {
  std::vector<std::vector<uint8_t>> tracks = std::vector<std::vector<uint8_t>>(10);
  uint64_t events = 0, sample = 1;
  void core(int t, f::Kind k, uint8_t flags, int64_t ts, int64_t dur, uint64_t corr, uint32_t name = 0) {
    put(tracks[t], f::CoreRecord{uint8_t(k), flags, 0, name, uint64_t(ts), uint64_t(dur), corr});
    ++events;
  }
  template <typename T>
  void ext(int t, T e, f::Ext type, uint32_t aux = 0) {
    e.h = {uint8_t(type), 0, uint16_t(sizeof(T)), aux};
    put(tracks[t], e);
  }
  // One 10 ms step: 2 ms data wait, 600 launches and kernels, 6 workers
  // reading and decoding 316 samples each, one batch of 64 samples ready at
  // the end of the wait (worker 0's first 64 of the step, decoded by then:
  // the lineage walk follows them).
  void step(uint64_t i) {
    const int64_t s = int64_t(i) * 10'000'000 + 1'000'000'000;
    const uint64_t first = sample;  // worker 0's samples of this step: first, first + 1, …
    core(1, f::Kind::kStep, 0, s, 10'000'000, i);
    ext(1, f::StepExt{{}, i}, f::Ext::kStep, 1);
    core(1, f::Kind::kDataWait, 0, s, 2'000'000, i + 1);
    ext(1, f::WorkExt{{}, 0, i + 1, 0, 0}, f::Ext::kWork, 1);
    for (int k = 0; k < 600; ++k) {
      const int64_t t = s + 2'000'000 + k * 12'000;
      core(1, f::Kind::kApiCall, 0, t, 1'000, 0, 2);
      core(2, f::Kind::kKernel, 0, t + 1'000, 11'000, 0, 3);
    }
    for (int w = 0; w < 6; ++w) {
      for (int k = 0; k < 316; ++k) {
        const int64_t t = s + k * 30'000;
        core(3 + w, f::Kind::kStorageRead, f::kAsync, t, 10'000, 0, 4);
        f::IoExt io{};
        io.bytes = 65536;
        io.sample_id = sample;
        io.tier = 1;
        ext(3 + w, io, f::Ext::kIo, 4);
        core(3 + w, f::Kind::kPreprocess, 0, t + 10'000, 20'000, 0, 5);
        ext(3 + w, f::WorkExt{{}, sample, 0, 1, 0}, f::Ext::kWork, uint32_t(w));
        ++sample;
      }
    }
    core(1, f::Kind::kBatchReady, f::kInstant, s + 2'000'000, 0, i + 1);
    ext(1, f::WorkExt{{}, first, i + 1, 64, 0}, f::Ext::kWork);
    f::ExtHeader h{uint8_t(f::Ext::kIdList), 0, uint16_t(8 + 64 * 8), 64};
    put(tracks[1], h);
    for (uint64_t id = first; id < first + 64; ++id) put(tracks[1], id);
  }
  std::vector<uint8_t> take() {
    std::vector<uint8_t> p;
    for (uint32_t t = 1; t < tracks.size(); ++t) {
      if (tracks[t].empty()) continue;
      put(p, f::TrackBlock{t, uint32_t(tracks[t].size())});
      p.insert(p.end(), tracks[t].begin(), tracks[t].end());
      tracks[t].clear();
    }
    return p;
  }
};

uint64_t generate(const std::string& path, uint64_t steps) {
  Writer w(path);
  std::vector<uint8_t> strings;
  const char* names[] = {"", "trainer", "cudaLaunchKernel", "gemm", "/data/shard", "decode"};
  for (uint32_t id = 1; id < 6; ++id) {
    put(strings, f::StringEntry{id, uint32_t(std::strlen(names[id]))});
    strings.insert(strings.end(), names[id], names[id] + std::strlen(names[id]));
    while (strings.size() % 8) strings.push_back(0);
  }
  w.chunk(f::ChunkType::kStrings, strings, 1);
  std::vector<uint8_t> tracks;
  put(tracks, f::TrackEntry{1, uint8_t(f::TrackType::kThread), {}, 100, 0, 1, 0});
  put(tracks, f::TrackEntry{2, uint8_t(f::TrackType::kGpuStream), {}, 7, 0, 0, 0});
  for (uint32_t t = 3; t < 9; ++t) put(tracks, f::TrackEntry{t, uint8_t(f::TrackType::kThread), {}, 200 + t, 0, 0, 0});
  w.chunk(f::ChunkType::kTracks, tracks, 1);
  const std::string meta = R"({"rank":0,"host":"bench","affinity_count":8})";
  w.chunk(f::ChunkType::kMetadata, {meta.begin(), meta.end()}, 1);
  Gen g;
  for (uint64_t i = 0; i < steps; ++i) {
    g.step(i);
    if (i % 4 == 3 || i + 1 == steps) w.chunk(f::ChunkType::kEvents, g.take(), int64_t(i) * 10'000'000 + 1'000'000'000);
  }
  std::vector<uint8_t> end;
  put(end, f::EndSummary{});
  w.chunk(f::ChunkType::kEnd, end, int64_t(steps) * 10'000'000 + 2'000'000'000);
  return g.events;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The extensions the analyzer asks the reader for (analyzer/src/input.cpp).
constexpr uint32_t kAnalyzerExts =
    stallscope::reader::ext_bit(f::Ext::kIo) | stallscope::reader::ext_bit(f::Ext::kWork) |
    stallscope::reader::ext_bit(f::Ext::kCopy) | stallscope::reader::ext_bit(f::Ext::kStep) |
    stallscope::reader::ext_bit(f::Ext::kCollective) | stallscope::reader::ext_bit(f::Ext::kIdList);

// --- child modes: each prints one line "<seconds> <count>" on stdout ---

int mode_read_bytes(const std::string& path) {
  const auto t0 = Clock::now();
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  uint64_t sum = 0;
  while (in.read(buf.data(), long(buf.size())) || in.gcount() > 0) sum += uint8_t(buf[0]);
  std::printf("%.6f %llu\n", seconds_since(t0), static_cast<unsigned long long>(sum));
  return 0;
}

// Record: reader::Event (copied out) or reader::RecordView (in place, as
// the analyzer reads); `mask`: the extensions decoded (kAllExts, or the
// analyzer's set).
template <typename Record>
int mode_decode(const std::string& path, uint32_t mask) {
  const auto t0 = Clock::now();
  stallscope::reader::TraceReader r(path);
  Record e;
  uint64_t n = 0;
  while (r.next(e, mask)) ++n;
  std::printf("%.6f %llu\n", seconds_since(t0), static_cast<unsigned long long>(n));
  return 0;
}

int mode_analyze(const std::string& path) {
  const auto t0 = Clock::now();
  auto rep = stallscope::analyzer::analyze_paths({path}, {});
  std::ostringstream json;
  stallscope::analyzer::write_json(json, rep);
  const size_t steps = rep.ranks.empty() ? 0 : rep.ranks[0].steps.size();
  std::printf("%.6f %zu\n", seconds_since(t0), steps);
  std::fprintf(stderr, "  summary: %s\n", rep.ranks.empty() ? "(no rank)" : rep.ranks[0].summary.c_str());
  return 0;
}

// The report of `path` (a file or run directory) as JSON on stdout: to compare
// the analysis before and after a change.
int mode_json(const std::string& path) {
  const auto rep = stallscope::analyzer::analyze_paths({path}, {});
  stallscope::analyzer::write_json(std::cout, rep);
  return 0;
}

// --- parent: runs a child, times it, reads its peak RSS ---

struct Run {
  double wall_s = 0, child_s = 0, cpu_s = 0, rss_mib = 0;
  uint64_t count = 0;
  bool ok = false;
};

Run run_child(const std::vector<std::string>& argv) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    std::vector<char*> av;
    for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    execv(av[0], av.data());
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fd[0]);
  int st = 0;
  rusage ru{};
  wait4(pid, &st, 0, &ru);
  Run r;
  r.wall_s = seconds_since(t0);
  r.rss_mib = double(ru.ru_maxrss) / 1024;
  r.cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  unsigned long long c = 0;
  if (std::sscanf(out.c_str(), "%lf %llu", &r.child_s, &c) == 2) r.count = c;
  return r;
}

struct Config {
  uint64_t steps = 10000, small_steps = 2000, repeat = 3;
  std::string cli, self;
};

Config parse(int argc, char** argv) {
  Config c;
  c.self = std::filesystem::canonical("/proc/self/exe").string();
  const auto sib = std::filesystem::path(c.self).parent_path().parent_path() / "bin" / "stallscope";
  if (std::filesystem::exists(sib)) c.cli = sib.string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--steps") c.steps = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--small-steps") c.small_steps = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--repeat")
      c.repeat = std::max<uint64_t>(1, std::strtoull(v.c_str(), nullptr, 10));
    else if (k == "--cli") c.cli = v == "none" ? "" : v;
    else std::fprintf(stderr, "analyze_bench: unknown flag %s (ignored)\n", k.c_str());
  }
  return c;
}

// The timed end-to-end run: the command when there is one, else in-process.
Run analyze(const Config& c, const std::string& path) {
  if (c.cli.empty()) return run_child({c.self, "analyze", path});
  Run r = run_child({"/bin/sh", "-c", "exec \"$0\" report --json \"$1\" > /dev/null", c.cli, path});
  r.child_s = r.wall_s;
  return r;
}

// The run of `repeat` that took the least CPU (a failed run wins, to be reported).
template <typename Fn>
Run best_of(const char* what, uint64_t repeat, Fn&& once) {
  Run best;
  std::printf("%s CPU s:", what);
  for (uint64_t i = 0; i < repeat; ++i) {
    const Run r = once();
    std::printf(" %.3f", r.cpu_s);
    if (!r.ok) {
      best = r;
      break;
    }
    if (i == 0 || r.cpu_s < best.cpu_s) best = r;
  }
  std::printf("\n");
  return best;
}

std::string trace_path(uint64_t steps) {
  return "/tmp/stallscope-analyze-bench-" + std::to_string(::getpid()) + "-" + std::to_string(steps) + ".sst";
}

void info(const char* name, double v, const char* unit) { std::printf("INFO %s %.3f %s\n", name, v, unit); }

bool result(const char* name, double v, const char* unit, const char* op, double target) {
  const bool pass = std::strcmp(op, ">=") == 0 ? v >= target : v <= target;
  std::printf("RESULT %s %.4g %s target %s %g %s\n", name, v, unit, op, target, pass ? "PASS" : "MISS");
  return pass;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "analyze") == 0) return mode_analyze(argv[2]);
  using stallscope::reader::Event;
  using stallscope::reader::RecordView;
  if (argc == 3 && std::strcmp(argv[1], "decode") == 0)
    return mode_decode<Event>(argv[2], stallscope::reader::kAllExts);
  if (argc == 3 && std::strcmp(argv[1], "decode-analyzer-exts") == 0)
    return mode_decode<Event>(argv[2], kAnalyzerExts);
  if (argc == 3 && std::strcmp(argv[1], "decode-views") == 0)
    return mode_decode<RecordView>(argv[2], kAnalyzerExts);
  if (argc == 3 && std::strcmp(argv[1], "json") == 0) return mode_json(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "read") == 0) return mode_read_bytes(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "gen") == 0) {  // for profiling: keeps the file
    std::printf("%llu events\n", static_cast<unsigned long long>(generate(argv[2], std::strtoull(argv[3], nullptr, 10))));
    return 0;
  }
  const Config c = parse(argc, argv);
  std::printf("timed run: %s\n", c.cli.empty() ? "in-process analyze_paths + write_json (no stallscope binary)"
                                                 : (c.cli + " report --json FILE").c_str());
  const std::string big = trace_path(c.steps), small = trace_path(c.small_steps);
  auto t0 = Clock::now();
  const uint64_t events = generate(big, c.steps);
  std::printf("generated %llu events, %llu steps, %.0f MiB in %.1f s\n", static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(c.steps), double(std::filesystem::file_size(big)) / (1 << 20),
              seconds_since(t0));
  const Run bytes =
      best_of("read bytes", c.repeat, [&] { return run_child({c.self, "read", big}); });
  const Run decode =
      best_of("reader decode", c.repeat, [&] { return run_child({c.self, "decode", big}); });
  const Run decode_views =
      best_of("reader decode as the analyzer reads (views, its extensions)", c.repeat,
              [&] { return run_child({c.self, "decode-views", big}); });
  const Run an = best_of("analyze", c.repeat, [&] { return analyze(c, big); });
  std::remove(big.c_str());
  generate(small, c.small_steps);
  const Run an_small = analyze(c, small);
  std::remove(small.c_str());
  if (!bytes.ok || !decode.ok || !decode_views.ok || !an.ok || !an_small.ok) {
    std::printf("a child run failed (read %d decode %d analyze %d small %d)\n", bytes.ok, decode.ok, an.ok,
                an_small.ok);
    return 1;
  }
  std::printf("least-CPU runs (of %llu): wall: read bytes %.3f s; reader decode %.3f s "
              "(%llu events); analyze %.3f s\n"
              "CPU (user+sys, one core): read bytes %.3f s; reader decode %.3f s; analyze %.3f s\n"
              "peak RSS %.1f MiB (%llu steps), %.1f MiB (%llu steps)\n",
              static_cast<unsigned long long>(c.repeat), bytes.child_s, decode.child_s,
              static_cast<unsigned long long>(decode.count), an.child_s, bytes.cpu_s, decode.cpu_s, an.cpu_s,
              an.rss_mib,
              static_cast<unsigned long long>(c.steps), an_small.rss_mib,
              static_cast<unsigned long long>(c.small_steps));
  // The machine may be shared: throughput is events ÷ CPU seconds (user + sys)
  // of the analysis process, the one-core figure; wall-clock figures are INFO.
  std::printf("note: events/s = events / CPU s of the analysis process (robust on a shared machine)\n");
  info("analyze_events_per_s_wall", double(events) / an.wall_s, "events/s");
  info("analyze_vs_read_bytes_wall", an.wall_s / bytes.wall_s, "x");
  info("reader_decode_events_per_s", double(decode.count) / decode.cpu_s, "events/s");
  info("reader_decode_views_events_per_s", double(decode_views.count) / decode_views.cpu_s,
       "events/s");
  info("analyze_vs_reader_decode", an.cpu_s / decode.cpu_s, "x");
  info("peak_rss_large", an.rss_mib, "MiB");
  info("peak_rss_small", an_small.rss_mib, "MiB");
  constexpr double kTargetEventsPerS = 20e6;
  bool ok = result("analyze_events_per_s", double(events) / an.cpu_s, "events/s", ">=", kTargetEventsPerS);
  // The same target as a ratio to reading the file's bytes (CPU, same run).
  ok = result("analyze_vs_read_bytes", an.cpu_s / bytes.cpu_s, "x", "<=",
              double(events) / kTargetEventsPerS / bytes.cpu_s) && ok;
  // Bounded memory: the peak at --steps within 20 % of the peak at --small-steps.
  ok = result("peak_rss_ratio_steps", an.rss_mib / an_small.rss_mib, "x", "<=", 1.2) && ok;
  return ok ? 0 : 2;
}
