// preload_fleet: what the preload shim's own threads cost a fleet of mostly
// idle processes. One program is both the driver and the workload. Each
// round the driver runs the workload three times, the order rotating:
//   sampler on   under LD_PRELOAD, the CPU sampler at its default period
//                (or STALLSCOPE_SAMPLE_MS=P with --period-ms P)
//   sampler off  under LD_PRELOAD, STALLSCOPE_SAMPLE_MS=0
//   floor        no shim; each process holds one thread that wakes every
//                10 ms and does nothing (what any 10 ms periodic thread pays)
// The workload is a trainer-like parent that forks 8 data-worker processes
// (fork without exec, as PyTorch's DataLoader does): 60 application
// threads in 9 processes (the parent's main thread and 11 more, each
// worker's main thread and 5 more). Every thread wakes every 5–50 ms and
// works ~20 µs of its own CPU time; every third thread also preads 4 KiB of
// a page-cached file on each wake-up.
//
// Every thread of a process that the program did not start is stallscope's
// (the recorder's flusher and sampler, the shim's fault sampler once a file
// is mapped), named by /proc/self/task/<tid>/comm ("unnamed" when it
// carries the program's name). Each process reads their CPU clocks in ns
// (the clock ids of pthread_getcpuclockid, built from the tids) after a
// 1 s warm-up and again just before it exits, once its application threads
// are joined; as a cross-check, utime+stime of /proc/self/task/<tid>/stat
// (whole clock ticks, each thread's rounded down, so it reads low). The
// driver sums over the 9 processes:
//
//   stallscope_cpu_pct = Σ stallscope threads' CPU ns / the parent's wall ns × 100
//                        (% of one core; "after warm-up": both from the snapshot)
//
// The verdicts are on the sampler's cost: stallscope_cpu_pct with the
// sampler on minus with it off, paired by round (median). It is not the
// sampler threads' CPU alone: a worker forked from a sampling process has
// no sampler thread, its flusher takes its samples every
// STALLSCOPE_WORKER_SAMPLE_MS (100 ms) until it records a step (the
// parent's sampler reads the worker's CPU time as a child's every tick).
// The sampler threads' own share (stallscope-samp) is printed too.
//
// The CPU the shim spends inside the application's own calls (the
// intercepted preads) is not in it: bench/preload_overhead measures that.
// The verdicts take the median of the sampler-on runs.
// --worker-period-ms P sets STALLSCOPE_WORKER_SAMPLE_MS=P (0: as the parent).
//
//   preload_fleet [--preload LIB] [--seconds 5] [--rounds 3] [--period-ms P] [--worker-period-ms P]
//   RESULT sampler_cpu_60_threads_9_procs <pct> % target <= 1.0 PASS|MISS
//   RESULT sampler_cpu_60_threads_9_procs_after_warmup <pct> % target <= 1.0 PASS|MISS
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr double kTargetPct = 1.0;
constexpr int kChildren = 8;
constexpr int kParentThreads = 12;  // main + 11
constexpr int kChildThreads = 6;    // main + 5; 12 + 8 × 6 = 60
constexpr long kFileBytes = 4L << 20;
constexpr const char* kFdVar = "STALLSCOPE_FLEET_FD";
constexpr const char* kFloorVar = "STALLSCOPE_FLEET_FLOOR";
constexpr double kGraceS = 30;  // past the run's length, before the driver kills the fleet

struct Args {
  std::string preload = STALLSCOPE_PRELOAD_LIB;
  double seconds = 5;
  int rounds = 3;
  int period_ms = 0;  // the sampler's period in the sampler-on runs (0: its default)
  int worker_period_ms = -1;  // STALLSCOPE_WORKER_SAMPLE_MS (-1: its default)
};

Args parse_args(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--preload"))
      a.preload = argv[i + 1];
    else if (!std::strcmp(argv[i], "--seconds"))
      a.seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--period-ms"))
      a.period_ms = std::max(0, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--worker-period-ms"))
      a.worker_period_ms = std::max(0, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--rounds"))
      a.rounds = std::max(1, std::atoi(argv[i + 1]));
    else
      std::fprintf(stderr, "preload_fleet: unknown option %s (ignored)\n", argv[i]);
  }
  return a;
}

int64_t clock_ns(clockid_t c) {
  timespec ts{};
  if (clock_gettime(c, &ts) != 0) return -1;
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// ---------------------------------------------------------------- workload

std::atomic<int64_t> g_app_cpu_ns{0};  // the application threads' CPU, added at their end
std::mutex g_app_mu;
std::vector<pid_t> g_app_tids;  // the application threads, registered at their start

// One application thread: sleep 5–50 ms, work ~20 µs, maybe pread 4 KiB.
void sleeper(int seed, int fd, int64_t deadline_ns) {
  {
    std::lock_guard<std::mutex> lk(g_app_mu);
    g_app_tids.push_back(gettid());
  }
  std::minstd_rand rng(static_cast<unsigned>(seed) * 7919u + 1);
  static thread_local char buf[4096];
  volatile uint64_t sink = 0;
  while (clock_ns(CLOCK_MONOTONIC) < deadline_ns) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 46));
    const int64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0 < 20000) sink = sink + 1;
    if (fd >= 0 && seed % 3 == 0)
      (void)!pread(fd, buf, sizeof buf, long(rng() % (kFileBytes / 4096)) * 4096);
  }
  g_app_cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

std::string read_small(const std::string& path) {
  char buf[512];
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

// utime + stime of /proc/self/task/<tid>/stat, in clock ticks.
long stat_ticks(const std::string& tid) {
  const std::string s = read_small("/proc/self/task/" + tid + "/stat");
  const size_t paren = s.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream in(s.substr(paren + 2));  // field 3 (state) on
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::atol(field.c_str());
    if (i == 15) stime = std::atol(field.c_str());
  }
  return utime + stime;
}

// Threads the program did not start itself: stallscope's (and the floor
// run's reference thread), with their names and CPU times.
struct Other {
  pid_t tid;
  std::string name;  // "unnamed" when the name is the program's own
  int64_t ns;        // CPU clock (pthread_getcpuclockid's, built from the tid)
  long ticks;        // utime + stime of its stat
};
std::vector<Other> other_threads() {
  std::vector<pid_t> app;
  {
    std::lock_guard<std::mutex> lk(g_app_mu);
    app = g_app_tids;
  }
  std::vector<Other> out;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const pid_t tid = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || tid == getpid() || std::count(app.begin(), app.end(), tid)) continue;
    std::string comm = read_small(std::string("/proc/self/task/") + e->d_name + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm.rfind("stallscope-", 0) != 0 && comm.rfind("floor-", 0) != 0) comm = "unnamed";
    out.push_back(
        {tid, comm, clock_ns(clockid_t((~unsigned(tid) << 3) | 6)), stat_ticks(e->d_name)});
  }
  if (d != nullptr) closedir(d);
  return out;
}

// The line one process reports once its application threads are joined:
// role, pid, wall ns, ns from start to the warm-up snapshot, application
// threads, their CPU ns, then each other thread as name=ns/ticks/ns_at_snapshot.
std::string report_line(const char* role, int threads, int64_t wall_ns, int64_t snap_at_ns,
                        const std::vector<Other>& snap) {
  std::string line = std::string(role) + " " + std::to_string(getpid()) + " " +
                     std::to_string(wall_ns) + " " + std::to_string(snap_at_ns) + " " +
                     std::to_string(threads) + " " + std::to_string(g_app_cpu_ns.load());
  for (const Other& o : other_threads()) {
    int64_t before = 0;  // a thread started after the snapshot counts whole
    for (const Other& s : snap) before = s.tid == o.tid ? s.ns : before;
    line += " " + o.name + "=" + std::to_string(o.ns) + "/" + std::to_string(o.ticks) + "/" +
            std::to_string(before);
  }
  return line + "\n";
}

// The reference: a thread that wakes every 10 ms as the sampler does
// (a condition variable's timed wait on a fixed grid) and does nothing.
void empty_wakeups(const std::atomic<bool>* stop) {
  pthread_setname_np(pthread_self(), "floor-10ms");
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lk(mu);
  auto next = std::chrono::steady_clock::now();
  while (!stop->load()) {
    next += std::chrono::milliseconds(10);
    cv.wait_until(lk, next, [] { return false; });
  }
}

// One process of the fleet: `threads` application threads (this one
// included) until the deadline, then its report on the driver's pipe.
// This thread first sleeps through the warm-up and snapshots the other
// threads' CPU. The floor run adds one empty 10 ms wake-up thread,
// reported like stallscope's.
void run_process(const char* role, int threads, int seed, int data_fd, int64_t deadline_ns,
                 int64_t warmup_ns) {
  const int64_t t0 = clock_ns(CLOCK_MONOTONIC);
  std::atomic<bool> stop{false};
  std::thread floor;
  if (std::getenv(kFloorVar) != nullptr) floor = std::thread(empty_wakeups, &stop);
  std::vector<std::thread> ts;
  for (int i = 1; i < threads; ++i) ts.emplace_back(sleeper, seed * 100 + i, data_fd, deadline_ns);
  std::this_thread::sleep_for(std::chrono::nanoseconds(warmup_ns));
  const std::vector<Other> snap = other_threads();
  const int64_t snap_at = clock_ns(CLOCK_MONOTONIC) - t0;
  sleeper(seed * 100, data_fd, deadline_ns);
  for (auto& t : ts) t.join();
  const std::string line =
      report_line(role, threads, clock_ns(CLOCK_MONOTONIC) - t0, snap_at, snap);
  stop = true;
  if (floor.joinable()) floor.join();
  const char* fd = std::getenv(kFdVar);
  if (fd != nullptr) (void)!write(std::atoi(fd), line.data(), line.size());  // < PIPE_BUF: atomic
}

int workload(const char* data, double seconds) {
  const int data_fd = open(data, O_RDONLY);
  const int64_t deadline = clock_ns(CLOCK_MONOTONIC) + int64_t(seconds * 1e9);
  const int64_t warmup = std::min(int64_t(1e9), int64_t(seconds * 0.25e9));
  std::vector<pid_t> kids;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      run_process("worker", kChildThreads, i + 1, data_fd, deadline, warmup);
      std::exit(0);  // a normal exit: the recorder completes the child's file
    }
    if (pid > 0) kids.push_back(pid);
  }
  run_process("trainer", kParentThreads, 0, data_fd, deadline, warmup);
  for (const pid_t k : kids) waitpid(k, nullptr, 0);
  return 0;
}

// ------------------------------------------------------------------ driver

struct Proc {
  std::string role;
  long pid = 0;
  int64_t wall_ns = 0;
  int64_t snap_at_ns = 0;  // the warm-up snapshot, from the process's start
  int app_threads = 0;
  int64_t app_ns = 0;
  struct Cpu {
    int64_t ns = 0, ns_at_snap = 0;
    long ticks = 0;
  };
  std::map<std::string, Cpu> own;  // summed by thread name
  int own_threads = 0;
};

Proc parse_line(const std::string& line) {
  std::istringstream in(line);
  Proc p;
  in >> p.role >> p.pid >> p.wall_ns >> p.snap_at_ns >> p.app_threads >> p.app_ns;
  std::string item;
  while (in >> item) {  // name=ns/ticks/ns_at_snapshot
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    Proc::Cpu& c = p.own[item.substr(0, eq)];
    long long ns = 0, before = 0;
    long ticks = 0;
    if (std::sscanf(item.c_str() + eq + 1, "%lld/%ld/%lld", &ns, &ticks, &before) != 3) continue;
    c.ns += ns, c.ticks += ticks, c.ns_at_snap += before;
    ++p.own_threads;
  }
  return p;
}

struct Run {
  std::vector<Proc> procs;
  int64_t wall_ns = 0, snap_at_ns = 0;  // the parent's
  int64_t own_ns = 0, own_ns_at_snap = 0;
  int64_t samp_ns = 0, samp_ns_at_snap = 0;  // the sampler threads only
  long own_ticks = 0;
  double pct = 0, tick_pct = 0, steady_pct = 0;
  double samp_pct = 0, samp_steady_pct = 0;
};

constexpr const char* kSamplerThread = "stallscope-samp";

void summarize(Run* r) {
  for (const Proc& p : r->procs) {
    if (p.role == "trainer") r->wall_ns = p.wall_ns, r->snap_at_ns = p.snap_at_ns;
    for (const auto& [name, c] : p.own) {
      r->own_ns += c.ns, r->own_ticks += c.ticks, r->own_ns_at_snap += c.ns_at_snap;
      if (name == kSamplerThread) r->samp_ns += c.ns, r->samp_ns_at_snap += c.ns_at_snap;
    }
  }
  if (r->wall_ns <= r->snap_at_ns) return;
  const double tick_ns = 1e9 / double(sysconf(_SC_CLK_TCK));
  r->pct = 100.0 * double(r->own_ns) / double(r->wall_ns);
  r->tick_pct = 100.0 * double(r->own_ticks) * tick_ns / double(r->wall_ns);
  r->steady_pct =
      100.0 * double(r->own_ns - r->own_ns_at_snap) / double(r->wall_ns - r->snap_at_ns);
  r->samp_pct = 100.0 * double(r->samp_ns) / double(r->wall_ns);
  r->samp_steady_pct =
      100.0 * double(r->samp_ns - r->samp_ns_at_snap) / double(r->wall_ns - r->snap_at_ns);
}

// The runs of one round: under the shim with the sampler on and off, and
// without the shim with one empty 10 ms wake-up thread per process.
enum class Mode { kOn, kOff, kFloor };
constexpr Mode kModes[] = {Mode::kOn, Mode::kOff, Mode::kFloor};
const char* mode_name(Mode m) {
  return m == Mode::kOn ? "sampler on" : m == Mode::kOff ? "sampler off" : "floor";
}

// Starts the workload and collects the processes' lines.
Run run_fleet(const char* self, const Args& a, const std::string& dir, const std::string& data,
              Mode mode, int round) {
  int p[2];
  Run r;
  if (pipe(p) != 0) return r;
  const std::string out = dir + "/run" + std::to_string(round) + "-" + std::to_string(int(mode));
  const std::string secs = std::to_string(a.seconds);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // the whole fleet can be killed at once
    close(p[0]);
    setenv(kFdVar, std::to_string(p[1]).c_str(), 1);
    if (mode == Mode::kFloor) {
      setenv(kFloorVar, "1", 1);
    } else {
      setenv("LD_PRELOAD", a.preload.c_str(), 1);
      setenv("STALLSCOPE_OUT", out.c_str(), 1);
      setenv("STALLSCOPE_QUIET", "on", 1);
      if (mode == Mode::kOff) setenv("STALLSCOPE_SAMPLE_MS", "0", 1);
      if (mode == Mode::kOn && a.period_ms > 0)
        setenv("STALLSCOPE_SAMPLE_MS", std::to_string(a.period_ms).c_str(), 1);
      if (a.worker_period_ms >= 0)
        setenv("STALLSCOPE_WORKER_SAMPLE_MS", std::to_string(a.worker_period_ms).c_str(), 1);
    }
    execl(self, self, "--workload", data.c_str(), secs.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  std::string text;
  char buf[4096];
  // EOF once all 9 processes have exited; a fleet that hangs is killed.
  const int64_t give_up = clock_ns(CLOCK_MONOTONIC) + int64_t((a.seconds + kGraceS) * 1e9);
  for (;;) {
    pollfd pfd{p[0], POLLIN, 0};
    const int64_t left_ms = (give_up - clock_ns(CLOCK_MONOTONIC)) / 1000000;
    if (left_ms <= 0 || poll(&pfd, 1, int(left_ms)) == 0) {
      std::fprintf(stderr, "preload_fleet: the workload did not end; killed\n");
      if (pid > 0) kill(-pid, SIGKILL);
      break;
    }
    const ssize_t n = read(p[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  close(p[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) r.procs.push_back(parse_line(line));
  summarize(&r);
  return r;
}

std::string breakdown(const Run& r) {
  std::map<std::string, int64_t> by_name;
  for (const Proc& p : r.procs)
    for (const auto& [name, c] : p.own) by_name[name] += c.ns;
  std::string s;
  char buf[96];
  for (const auto& [name, ns] : by_name) {
    std::snprintf(buf, sizeof buf, " %s %.3f", name.c_str(),
                  100.0 * double(ns) / double(r.wall_ns));
    s += buf;
  }
  return s;
}

void print_run(int round, Mode mode, const Run& r) {
  int app = 0, own = 0;
  int64_t app_ns = 0;
  for (const Proc& p : r.procs) app += p.app_threads, own += p.own_threads, app_ns += p.app_ns;
  std::printf(
      "round %d %-11s: %zu procs, %d app threads (%.2f %% of a core), %d other threads: "
      "%.3f %% of one core (from ticks %.2f %%, after warm-up %.3f %%); by thread (%%):%s\n",
      round, mode_name(mode), r.procs.size(), app, 100.0 * double(app_ns) / double(r.wall_ns), own,
      r.pct, r.tick_pct, r.steady_pct, breakdown(r).c_str());
}

void print_procs(const char* what, const Run& r) {
  std::printf("per process, %s (%% of one core over the process's own wall time):\n", what);
  for (const Proc& p : r.procs) {
    int64_t ns = 0;
    std::string names;
    for (const auto& [name, c] : p.own) {
      char pct[32];
      std::snprintf(pct, sizeof pct, " %.3f", 100.0 * double(c.ns) / double(p.wall_ns));
      ns += c.ns, names += " " + name + pct;
    }
    std::printf("  %-7s pid %-7ld wall %.2f s  %d app threads  other threads %.3f %% (%s )\n",
                p.role.c_str(), p.pid, double(p.wall_ns) / 1e9, p.app_threads,
                100.0 * double(ns) / double(p.wall_ns), names.c_str());
  }
}

struct Spread {
  double min, median, max;
};
Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

// Medians and spreads over the rounds, and the verdicts: on the whole run
// (start-up included, as a short job sees it) and after the warm-up.
void print_summary(const std::vector<double> (&whole)[3], const std::vector<double> (&steady)[3],
                   const std::vector<double>& samp, const std::vector<double>& samp_steady) {
  for (const Mode m : kModes) {
    const Spread w = spread(whole[int(m)]), st = spread(steady[int(m)]);
    std::printf(
        "%-11s: median %.3f %% of one core (min %.3f, max %.3f); after warm-up %.3f %% "
        "(min %.3f, max %.3f); %zu runs\n",
        mode_name(m), w.median, w.min, w.max, st.median, st.min, st.max, whole[int(m)].size());
  }
  const double on = spread(whole[0]).median;
  const double floor = spread(whole[2]).median;
  // The sampler's cost wherever it runs (its own threads, and the workers'
  // flushers that take their samples): sampler on minus sampler off, paired
  // by round.
  std::vector<double> cost, cost_steady;
  for (size_t i = 0; i < whole[0].size() && i < whole[1].size(); ++i) {
    cost.push_back(whole[0][i] - whole[1][i]);
    cost_steady.push_back(steady[0][i] - steady[1][i]);
  }
  const Spread c = spread(cost), cs = spread(cost_steady);
  std::printf(
      "sampler (on - off, paired by round): median %.3f %% of one core (min %.3f, max %.3f); "
      "after warm-up %.3f %% (min %.3f, max %.3f)\n",
      c.median, c.min, c.max, cs.median, cs.min, cs.max);
  std::printf("one empty 10 ms wake-up thread per process (floor): %.3f %% per process\n",
              floor / (kChildren + 1));
  const Spread sp = spread(samp), sps = spread(samp_steady);
  std::printf(
      "sampler threads (%s) with the sampler on: median %.3f %% of one core (min %.3f, max "
      "%.3f); after warm-up %.3f %% (min %.3f, max %.3f)\n",
      kSamplerThread, sp.median, sp.min, sp.max, sps.median, sps.min, sps.max);
  std::printf("all stallscope threads with the sampler on: %.3f %% of one core\n", on);
  std::printf("RESULT sampler_cpu_60_threads_9_procs %.3f %% target <= %.1f %s\n", c.median,
              kTargetPct, c.median <= kTargetPct ? "PASS" : "MISS");
  std::printf("RESULT sampler_cpu_60_threads_9_procs_after_warmup %.3f %% target <= %.1f %s\n",
              cs.median, kTargetPct, cs.median <= kTargetPct ? "PASS" : "MISS");
}

bool make_data(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  std::vector<char> block(1 << 20, 'x');
  bool ok = true;
  for (long i = 0; i < kFileBytes / long(block.size()); ++i)
    ok = ok && write(fd, block.data(), block.size()) == ssize_t(block.size());
  close(fd);
  return ok;
}

int driver(const char* self, const Args& a) {
  if (access(a.preload.c_str(), R_OK) != 0)
    return std::fprintf(stderr, "preload_fleet: %s is not readable\n", a.preload.c_str()), 2;
  char dir[] = "/tmp/stallscope-fleet-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 2;
  const std::string data = std::string(dir) + "/data.bin";
  if (!make_data(data))
    return std::fprintf(stderr, "preload_fleet: cannot write %s\n", data.c_str()), 2;
  std::printf(
      "preload_fleet: 1 trainer + %d forked workers, 60 application threads, %.1f s per run, "
      "sampler period %s, workers' %s, shim %s\n",
      kChildren, a.seconds,
      a.period_ms > 0 ? (std::to_string(a.period_ms) + " ms").c_str() : "default",
      a.worker_period_ms >= 0 ? (std::to_string(a.worker_period_ms) + " ms").c_str() : "default",
      a.preload.c_str());
  std::printf(
      "stallscope_cpu_pct = sum of the stallscope threads' CPU ns / parent wall ns x 100\n");
  std::vector<double> whole[3], steady[3], samp, samp_steady;
  Run last[3];
  for (int round = 1; round <= a.rounds; ++round) {
    for (int k = 0; k < 3; ++k) {
      const Mode mode = kModes[(round - 1 + k) % 3];  // the order rotates every round
      Run r = run_fleet(self, a, dir, data, mode, round);
      if (r.wall_ns <= 0)
        return std::fprintf(stderr, "preload_fleet: the workload reported nothing\n"), 1;
      print_run(round, mode, r);
      whole[int(mode)].push_back(r.pct);
      steady[int(mode)].push_back(r.steady_pct);
      if (mode == Mode::kOn) samp.push_back(r.samp_pct), samp_steady.push_back(r.samp_steady_pct);
      last[int(mode)] = std::move(r);
    }
  }
  for (const Mode m : kModes)
    print_procs((std::string("last ") + mode_name(m) + " run").c_str(), last[int(m)]);
  if (breakdown(last[0]).find("stallscope-samp") == std::string::npos)
    std::printf("warning: no stallscope-samp thread was seen: is the shim attached?\n");
  print_summary(whole, steady, samp, samp_steady);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !std::strcmp(argv[1], "--workload"))
    return workload(argv[2], std::atof(argv[3]));
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  return driver(ec ? argv[0] : self.c_str(), parse_args(argc, argv, 1));
}
