// record_bench: what recording costs on the hot path, next to the physical
// floor of a span (two timestamp reads) measured in the same run.
//
//   build/bench/record_bench            # prints tables, then RESULT lines
//
// Rows: a span (begin + end = one complete record) on 1 and 2 threads, in
// steady state and on first fill; the same with capture switched off; two
// rdtsc; two clock_gettime; and a reference loop of two rdtsc plus a
// 32-byte store into a per-thread ring (what a span cannot beat).
// Allocations during recording are counted (global operator new and
// malloc'd bytes), and the bytes a span takes on disk are measured from a
// flushed file.
//
// Steady state and first fill: a thread's ring (128 MiB here) has only its
// first 2 MiB touched at registration; the rest takes a minor fault per
// 4 KiB the first time the ring passes over it. So the span rows run on
// threads of their own, kept for the whole row (benchmark's Threads() would
// start fresh threads, with fresh rings, every repetition): each thread
// times its first 2 M spans (first fill: 64 MiB of fresh pages), then goes
// once round the rest of its ring untimed, then times 3 passes of 2 M spans
// over pages already touched (steady state). Right before each pass the
// thread times as many pairs of rdtsc, so each pass has its floor from the
// same moment of a shared machine: the figures are the median over the
// steady passes of span ÷ floor, and the first pass's. The rings are
// flushed between passes, so a pass never fills its ring; the file's growth
// checks that nothing was dropped.
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "stallscope/trace.hpp"

namespace {

// Allocations (malloc and operator new) made by the calling thread; the
// flusher's own are not the hot path's.
thread_local uint64_t t_allocs = 0;
constexpr int64_t kIterations = 2000000;  // spans per thread and pass: half the ring
constexpr int kSteadyPasses = 3;          // timed passes in steady state; the median counts
constexpr size_t kRecordBytes = 32;       // one complete span on the ring

stallscope::NameId span_name() {
  static const stallscope::NameId id = stallscope::intern("bench.span");
  return id;
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
  const std::string o(op);
  const bool pass = o == "<=" ? value <= target : o == ">=" ? value >= target : value == target;
  std::printf("RESULT %s %.3g %s target %s %g %s\n", name, value, unit, op, target,
              pass ? "PASS" : "MISS");
}

// Bytes of the run's trace files so far.
uint64_t run_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".sst") total += f.file_size();
  return total;
}

// `n` spans on the calling thread; ns per span (wall clock).
double span_loop(int64_t n) {
  const auto name = span_name();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    stallscope::Span s(stallscope::Kind::kRange, name);
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double, std::nano> t = std::chrono::steady_clock::now() - t0;
  return t.count() / double(n);
}

// `n` pairs of rdtsc on the calling thread; ns per pair (the floor, timed
// right before each span pass on the same thread, so that the ratio of the
// two sees the same moment of a shared machine).
double rdtsc_loop(int64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t a = __rdtsc();
    uint64_t b = __rdtsc();
    benchmark::DoNotOptimize(b - a);
  }
  const std::chrono::duration<double, std::nano> t = std::chrono::steady_clock::now() - t0;
  return t.count() / double(n);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

// One span row, means over the threads: ns per span on first fill and in
// each steady pass, the two-rdtsc floor timed beside each, and the spans
// recorded.
struct SpanRow {
  double first_fill = 0, first_fill_rdtsc = 0;
  std::vector<double> steady, steady_rdtsc;
  uint64_t spans = 0;
  bool flushed = true;  // every flush between passes succeeded
  double steady_median() const { return median_of(steady); }
  // The figure: the median over the steady passes of span ÷ its floor.
  double steady_ratio() const {
    std::vector<double> r;
    for (size_t i = 0; i < steady.size(); ++i) r.push_back(steady[i] / steady_rdtsc[i]);
    return median_of(r);
  }
  double first_fill_ratio() const { return first_fill / first_fill_rdtsc; }
};

// `threads` threads, each registered once and kept for the whole row:
// first fill, the rest of the ring untimed, then the steady passes, every
// pass followed by a flush (the main thread's, while the threads wait).
SpanRow span_row(int threads, size_t ring_bytes) {
  const int64_t ring_spans = int64_t(ring_bytes / kRecordBytes);
  // Untimed passes after the first: together they complete one round.
  const int64_t rest = std::max<int64_t>(0, ring_spans - kIterations);
  const int warm_passes = int((rest + kIterations - 1) / kIterations);
  const int passes = 1 + warm_passes + kSteadyPasses;
  std::vector<std::vector<double>> ns(size_t(passes), std::vector<double>(size_t(threads), 0.0));
  auto floor_ns = ns;
  std::barrier sync(threads + 1);
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k)
    pool.emplace_back([&, k] {
      { stallscope::Span warm(stallscope::Kind::kRange, span_name()); }  // registers
      sync.arrive_and_wait();
      for (int p = 0; p < passes; ++p) {
        // The floor first, while the flusher is idle (the rings were just
        // flushed), then the pass (with the flusher's periodic drains).
        floor_ns[size_t(p)][size_t(k)] = rdtsc_loop(kIterations);
        ns[size_t(p)][size_t(k)] = span_loop(kIterations);
        sync.arrive_and_wait();  // the pass is over: the main thread flushes
        sync.arrive_and_wait();
      }
    });
  SpanRow row;
  sync.arrive_and_wait();
  for (int p = 0; p < passes; ++p) {
    sync.arrive_and_wait();
    row.flushed = stallscope_flush() == 0 && row.flushed;
    sync.arrive_and_wait();
  }
  for (auto& t : pool) t.join();
  auto mean = [&](const std::vector<std::vector<double>>& t, int p) {
    double sum = 0;
    for (double v : t[size_t(p)]) sum += v;
    return sum / threads;
  };
  row.first_fill = mean(ns, 0), row.first_fill_rdtsc = mean(floor_ns, 0);
  for (int p = 1 + warm_passes; p < passes; ++p)
    row.steady.push_back(mean(ns, p)), row.steady_rdtsc.push_back(mean(floor_ns, p));
  row.spans = uint64_t(threads) * (uint64_t(passes) * kIterations + 1);
  return row;
}

// Bytes one span takes on disk: record 1 M spans, flush, compare file sizes.
double bytes_per_span(const std::string& dir) {
  stallscope_flush();
  const uint64_t before = run_bytes(dir);
  const auto name = span_name();
  for (int i = 0; i < 1000000; ++i) stallscope::Span s(stallscope::Kind::kRange, name);
  stallscope_flush();
  return double(run_bytes(dir) - before) / 1e6;
}

}  // namespace

extern "C" void* __libc_malloc(size_t);  // glibc's allocator, under our wrapper

// operator new allocates through malloc, so this counts both.
extern "C" void* malloc(size_t n) {
  ++t_allocs;
  return __libc_malloc(n);
}

// The ring each thread gets: STALLSCOPE_THREAD_BUFFER_KB rounded up to a
// power of two, as the recorder does (128 MiB unless set otherwise).
size_t ring_bytes() {
  const char* kb = std::getenv("STALLSCOPE_THREAD_BUFFER_KB");
  const unsigned long long v = kb != nullptr ? std::strtoull(kb, nullptr, 10) : 0;
  size_t n = 64u << 10;
  while (n < (v << 10) && n < (size_t{1} << 30)) n <<= 1;
  return v != 0 ? n : size_t{128} << 20;
}

void print_row(const char* what, double ns, double ratio) {
  std::printf("%-32s %8.2f ns %6.2f x two rdtsc (timed beside it)\n", what, ns, ratio);
}

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/record-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  setenv("STALLSCOPE_OUT", dir.c_str(), 0);
  setenv("STALLSCOPE_THREAD_BUFFER_KB", "131072", 0);  // 4 M records per thread
  setenv("STALLSCOPE_BUFFER_MB", "1024", 0);  // this thread's ring and 2 rows' at once
  setenv("STALLSCOPE_MAX_MB", "4096", 0);     // the span rows write ~1 GB
  setenv("STALLSCOPE_SAMPLE_MS", "0", 0);  // the sampler has its own benchmark
  if (stallscope_init() != 0) {
    std::fprintf(stderr, "record_bench: recorder did not start\n");
    return 1;
  }
  { stallscope::Span warm(stallscope::Kind::kRange, span_name()); }  // registers the thread

  benchmark::Initialize(&argc, argv);
  Collector c;
  benchmark::RunSpecifiedBenchmarks(&c);

  const size_t ring = ring_bytes();
  stallscope_flush();
  const uint64_t bytes0 = run_bytes(dir);
  const SpanRow one = span_row(1, ring);
  const SpanRow two = span_row(2, ring);
  const bool flushed = stallscope_flush() == 0 && one.flushed && two.flushed;
  const double on_disk = double(run_bytes(dir) - bytes0) / double((one.spans + two.spans) * kRecordBytes);
  const double per_span = bytes_per_span(dir);

  // Allocations during a span loop on this thread, apart from the
  // benchmark's own bookkeeping.
  const uint64_t n0 = t_allocs;
  const auto name = span_name();
  for (int i = 0; i < 1000000; ++i) stallscope::Span s(stallscope::Kind::kRange, name);
  const uint64_t allocs = t_allocs - n0;

  const double rdtsc2 = find(c, "BM_two_rdtsc");
  const double gettime2 = find(c, "BM_two_clock_gettime");
  const double span1 = one.steady_median(), span2 = two.steady_median();
  const double ref1 = find(c, "BM_reference_rdtsc_store/threads:1");
  const double off1 = find(c, "BM_span_capture_off/threads:1");
  const double off2 = find(c, "BM_span_capture_off/threads:2");
  std::printf("\nspan rows: threads of their own, a %zu MiB ring each; first fill = the first "
              "%lld spans of a fresh ring, steady = the median of %d passes after one round; "
              "each pass after as many pairs of rdtsc on the same thread\n",
              ring >> 20, static_cast<long long>(kIterations), kSteadyPasses);
  print_row("span, 1 thread, first fill", one.first_fill, one.first_fill_ratio());
  print_row("span, 2 threads, first fill", two.first_fill, two.first_fill_ratio());
  print_row("span, 1 thread, steady", span1, one.steady_ratio());
  print_row("span, 2 threads, steady", span2, two.steady_ratio());
  for (const auto* r : {&one, &two}) {
    std::printf("  steady passes, %d thread%s, span / two rdtsc:", r == &one ? 1 : 2,
                r == &one ? "" : "s");
    for (size_t i = 0; i < r->steady.size(); ++i)
      std::printf(" %.2f/%.2f", r->steady[i], r->steady_rdtsc[i]);
    std::printf(" ns\n");
  }
  std::printf("span rows on disk: %.4f of their records' bytes%s\n", on_disk,
              flushed ? "" : " (a flush between passes failed)");
  std::printf("\nspan 1 thread %.2f ns, 2 threads %.2f ns; two rdtsc %.2f ns; two "
              "clock_gettime %.2f ns; reference %.2f ns; capture off %.2f / %.2f ns\n",
              span1, span2, rdtsc2, gettime2, ref1, off1, off2);
  std::printf("allocations in 1 M spans: %llu (malloc and operator new on the recording "
              "thread); %.1f bytes per span on disk\n", (unsigned long long)allocs, per_span);
  result("span_steady_vs_two_rdtsc_1thread", one.steady_ratio(), "ratio", "<=", 1.5);
  result("span_steady_vs_two_rdtsc_2threads", two.steady_ratio(), "ratio", "<=", 1.5);
  // Loose: a minor fault every 4 KiB of records on the first pass.
  result("span_first_fill_vs_two_rdtsc_1thread", one.first_fill_ratio(), "ratio", "<=", 4);
  result("span_first_fill_vs_two_rdtsc_2threads", two.first_fill_ratio(), "ratio", "<=", 4);
  result("span_rows_bytes_on_disk_vs_recorded", flushed ? on_disk : 0, "ratio", ">=", 0.999);
  result("reference_vs_two_rdtsc", ref1 / rdtsc2, "ratio", "<=", 1.5);
  result("span_vs_two_clock_gettime_1thread", span1 / gettime2, "ratio", "<=", 1.0);
  result("span_capture_off", off1, "ns", "<=", 2.0);
  result("allocations_per_million_spans", double(allocs), "count", "==", 0);
  result("bytes_per_span_on_disk", per_span, "bytes", "<=", 40);
  stallscope_shutdown();  // before its files go: a deleted trace file is reported
  std::filesystem::remove_all(dir);
  return 0;
}
