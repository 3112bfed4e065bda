// record_bench: what recording costs on the hot path, next to the physical
// floor of a span (two timestamp reads) measured in the same run.
//
//   build/bench/record_bench            # prints tables, then RESULT lines
//
// Rows: a span (begin + end = one complete record) on 1 and 2 threads; the
// same with capture switched off; two rdtsc; two clock_gettime; and a
// reference loop of two rdtsc plus a 32-byte store into a per-thread ring
// (what a span cannot beat). Allocations during recording are counted
// (global operator new and malloc'd bytes), and the bytes a span takes on
// disk are measured from a flushed file.
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <x86intrin.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>
#include <string>

#include "stallscope/trace.hpp"

namespace {

// Allocations (malloc and operator new) made by the calling thread; the
// flusher's own are not the hot path's.
thread_local uint64_t t_allocs = 0;
constexpr int64_t kIterations = 2000000;  // per thread and repetition: fits the buffer

stallscope::NameId span_name() {
  static const stallscope::NameId id = stallscope::intern("bench.span");
  return id;
}

void BM_span(benchmark::State& state) {
  const auto name = span_name();
  for (auto _ : state) {
    stallscope::Span s(stallscope::Kind::kRange, name);
    benchmark::ClobberMemory();
  }
}

void BM_span_capture_off(benchmark::State& state) {
  const auto name = span_name();
  if (state.thread_index() == 0) stallscope_capture_set(0);
  for (auto _ : state) {
    stallscope::Span s(stallscope::Kind::kRange, name);
    benchmark::ClobberMemory();
  }
  if (state.thread_index() == 0) stallscope_capture_set(1);
}

void BM_two_rdtsc(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t a = __rdtsc();
    uint64_t b = __rdtsc();
    benchmark::DoNotOptimize(b - a);
  }
}

void BM_two_clock_gettime(benchmark::State& state) {
  for (auto _ : state) {
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    benchmark::DoNotOptimize(a.tv_nsec + b.tv_nsec);
  }
}

// Two rdtsc and one 32-byte store into a per-thread ring: the floor.
void BM_reference_rdtsc_store(benchmark::State& state) {
  struct alignas(32) Rec {
    uint64_t a, b, c, d;
  };
  static thread_local Rec ring[1 << 14];
  uint64_t i = 0;
  for (auto _ : state) {
    uint64_t t0 = __rdtsc();
    uint64_t t1 = __rdtsc();
    ring[i++ & ((1 << 14) - 1)] = Rec{t0, t1 - t0, 7, i};
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_two_rdtsc);
BENCHMARK(BM_two_clock_gettime);
BENCHMARK(BM_reference_rdtsc_store)->Threads(1)->Threads(2);
BENCHMARK(BM_span)->Iterations(kIterations)->Threads(1)->Threads(2)->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_span_capture_off)->Threads(1)->Threads(2);

// Collects real time per iteration (ns) by run name, beside the console.
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration || r.aggregate_name == "median")
        ns[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

double find(const Collector& c, const std::string& prefix) {
  for (const auto& [name, v] : c.ns)
    if (name.rfind(prefix, 0) == 0) return v;
  return -1;
}

void result(const char* name, double value, const char* unit, const char* op, double target) {
  const bool pass = std::string(op) == "<=" ? value <= target : value == target;
  std::printf("RESULT %s %.3g %s target %s %g %s\n", name, value, unit, op, target,
              pass ? "PASS" : "MISS");
}

// Bytes one span takes on disk: record 1 M spans, flush, compare file sizes.
double bytes_per_span(const std::string& dir) {
  auto size_of_run = [&] {
    uint64_t total = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir))
      if (f.path().extension() == ".sst") total += f.file_size();
    return total;
  };
  stallscope_flush();
  const uint64_t before = size_of_run();
  const auto name = span_name();
  for (int i = 0; i < 1000000; ++i) stallscope::Span s(stallscope::Kind::kRange, name);
  stallscope_flush();
  return double(size_of_run() - before) / 1e6;
}

}  // namespace

extern "C" void* __libc_malloc(size_t);  // glibc's allocator, under our wrapper

// operator new allocates through malloc, so this counts both.
extern "C" void* malloc(size_t n) {
  ++t_allocs;
  return __libc_malloc(n);
}

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/record-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  setenv("STALLSCOPE_OUT", dir.c_str(), 0);
  setenv("STALLSCOPE_THREAD_BUFFER_KB", "131072", 0);  // 4 M records per thread
  setenv("STALLSCOPE_BUFFER_MB", "512", 0);
  setenv("STALLSCOPE_MAX_MB", "1024", 0);
  setenv("STALLSCOPE_SAMPLE_MS", "0", 0);  // the sampler has its own benchmark
  if (stallscope_init() != 0) {
    std::fprintf(stderr, "record_bench: recorder did not start\n");
    return 1;
  }
  { stallscope::Span warm(stallscope::Kind::kRange, span_name()); }  // registers the thread

  benchmark::Initialize(&argc, argv);
  Collector c;
  benchmark::RunSpecifiedBenchmarks(&c);
  const double per_span = bytes_per_span(dir);

  // Allocations during a span loop on this thread, apart from the
  // benchmark's own bookkeeping.
  const uint64_t n0 = t_allocs;
  const auto name = span_name();
  for (int i = 0; i < 1000000; ++i) stallscope::Span s(stallscope::Kind::kRange, name);
  const uint64_t allocs = t_allocs - n0;

  const double rdtsc2 = find(c, "BM_two_rdtsc");
  const double gettime2 = find(c, "BM_two_clock_gettime");
  const double span1 = find(c, "BM_span/iterations:2000000/repeats:3/threads:1");
  const double span2 = find(c, "BM_span/iterations:2000000/repeats:3/threads:2");
  const double ref1 = find(c, "BM_reference_rdtsc_store/threads:1");
  const double off1 = find(c, "BM_span_capture_off/threads:1");
  const double off2 = find(c, "BM_span_capture_off/threads:2");
  std::printf("\nspan 1 thread %.2f ns, 2 threads %.2f ns; two rdtsc %.2f ns; two "
              "clock_gettime %.2f ns; reference %.2f ns; capture off %.2f / %.2f ns\n",
              span1, span2, rdtsc2, gettime2, ref1, off1, off2);
  std::printf("allocations in 1 M spans: %llu (malloc and operator new on the recording "
              "thread); %.1f bytes per span on disk\n", (unsigned long long)allocs, per_span);
  result("span_vs_two_rdtsc_1thread", span1 / rdtsc2, "ratio", "<=", 1.5);
  result("span_vs_two_rdtsc_2threads", span2 / rdtsc2, "ratio", "<=", 1.5);
  result("reference_vs_two_rdtsc", ref1 / rdtsc2, "ratio", "<=", 1.5);
  result("span_vs_two_clock_gettime_1thread", span1 / gettime2, "ratio", "<=", 1.0);
  result("span_capture_off", off1, "ns", "<=", 2.0);
  result("allocations_per_million_spans", double(allocs), "count", "==", 0);
  result("bytes_per_span_on_disk", per_span, "bytes", "<=", 40);
  std::filesystem::remove_all(dir);
  return 0;
}
