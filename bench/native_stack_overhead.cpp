// native_stack_overhead: the cost of the shim's native stack sampler
// (STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ) on a CPU-bound loop. The same loop
// (a fixed amount of arithmetic four calls deep, built with frame pointers
// so that the kernel walks a full chain at each sample) runs in child
// processes under the shim with the sampler off and on, interleaved: off,
// on, off, on, …, off. Each child reports the CPU time of its loop thread
// (CLOCK_THREAD_CPUTIME_ID, which includes the kernel's sampling work in
// that thread; the machine may be shared, so wall time is not used) and of
// the whole process (adds the drain thread's symbolizing and recording).
// Each "on" round is compared with the mean of the "off" rounds around it;
// the verdict is the median of those paired ratios.
//
//   native_stack_overhead [--hz N] [--rounds R] [--iters N]
//   RESULT native_stack_overhead <pct> % target <= 1 PASS|MISS
//   RESULT native_stack_overhead_process <pct> % target <= 1 PASS|MISS
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr double kTargetPct = 1.0;

double cpu_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

__attribute__((noinline)) double leaf(long n) {
  volatile double x = 1.0;
  for (long i = 0; i < n; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}
__attribute__((noinline)) double level3(long n) { return leaf(n) + 1.0; }
__attribute__((noinline)) double level2(long n) { return level3(n) + 1.0; }
__attribute__((noinline)) double level1(long n) { return level2(n) + 1.0; }

// Child: the timed loop. Prints thread and process CPU ms.
int loop(long iters) {
  const double t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), p0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  double sum = 0;
  for (long i = 0; i < iters / 100000; ++i) sum += level1(100000);
  const double t1 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), p1 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  std::printf("%.4f %.4f %d\n", (t1 - t0) / 1e6, (p1 - p0) / 1e6, sum > 0 ? 1 : 0);
  return 0;
}

struct Times {
  double thread_ms = -1, process_ms = -1;
};

Times run_child(const char* self, long iters, const char* hz, const std::string& out_dir) {
  int p[2];
  if (pipe(p) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    setenv("LD_PRELOAD", STALLSCOPE_PRELOAD_LIB, 1);
    setenv("STALLSCOPE_OUT", out_dir.c_str(), 1);
    setenv("STALLSCOPE_QUIET", "1", 1);
    setenv("STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ", hz, 1);
    const std::string n = std::to_string(iters);
    execl(self, self, "--loop", n.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  char text[128] = {};
  const ssize_t n = read(p[0], text, sizeof text - 1);
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  Times t;
  if (n > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
    std::sscanf(text, "%lf %lf", &t.thread_ms, &t.process_ms);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--loop") == 0) return loop(std::atol(argv[2]));
  std::string hz = "100";
  int rounds = 9;
  long iters = 300000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--hz") == 0) hz = argv[i + 1];
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atol(argv[i + 1]);
  }
  if (rounds < 1 || iters < 100000) {
    std::fprintf(stderr, "native_stack_overhead: --rounds must be positive, --iters >= 100000\n");
    return 2;
  }
  char dir[] = "/tmp/stallscope-native-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 2;
  std::vector<Times> off, on;
  for (int r = 0; r <= rounds; ++r) {
    off.push_back(run_child(argv[0], iters, "0", std::string(dir) + "/off" + std::to_string(r)));
    if (r < rounds)
      on.push_back(run_child(argv[0], iters, hz.c_str(), std::string(dir) + "/on" + std::to_string(r)));
  }
  const std::string cleanup = std::string("rm -rf ") + dir;
  (void)!std::system(cleanup.c_str());
  std::vector<double> thread_pct, process_pct, off_ms, on_ms;
  for (int r = 0; r < rounds; ++r) {
    const Times& a = off[r];
    const Times& b = off[r + 1];
    if (a.thread_ms <= 0 || b.thread_ms <= 0 || on[r].thread_ms <= 0) {
      std::fprintf(stderr, "native_stack_overhead: a child failed\n");
      return 1;
    }
    thread_pct.push_back((on[r].thread_ms / ((a.thread_ms + b.thread_ms) / 2) - 1.0) * 100.0);
    process_pct.push_back((on[r].process_ms / ((a.process_ms + b.process_ms) / 2) - 1.0) * 100.0);
    off_ms.push_back(a.thread_ms);
    on_ms.push_back(on[r].thread_ms);
  }
  const double t = median(thread_pct), p = median(process_pct);
  std::printf("CPU loop, %ld iterations 4 calls deep, %d paired rounds, sampler at %s Hz\n", iters,
              rounds, hz.c_str());
  std::printf("loop thread CPU ms: off median %.1f, on median %.1f\n", median(off_ms),
              median(on_ms));
  std::printf("paired %% (on over the off rounds around it): thread median %.2f%% (min %.2f%%, "
              "max %.2f%%), process median %.2f%%\n",
              t, *std::min_element(thread_pct.begin(), thread_pct.end()),
              *std::max_element(thread_pct.begin(), thread_pct.end()), p);
  std::printf("RESULT native_stack_overhead %.2f %% target <= %.0f %s\n", t, kTargetPct,
              t <= kTargetPct ? "PASS" : "MISS");
  std::printf("RESULT native_stack_overhead_process %.2f %% target <= %.0f %s\n", p, kTargetPct,
              p <= kTargetPct ? "PASS" : "MISS");
  return 0;
}
