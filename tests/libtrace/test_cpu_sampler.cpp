// The CPU sampler: thread and child CPU time against the threads' own
// clocks, idle CPUs, faults and /proc/stat from fake trees, stop()
// promptness, and the faults it must survive (threads exiting, fd
// exhaustion, the program closing our descriptors, no /proc, a throwing
// sink, fork). Nothing here depends on how fast a loaded machine is
// (RELIABILITY.md 38): a case waits for what it needs with a limit far
// beyond it, and a wrong behaviour is one that limit cannot hide.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "sys/cpu_sampler.hpp"
#include "sys/idle_cpus.hpp"

namespace fs = std::filesystem;
using namespace stallscope::sys;
using namespace std::chrono_literals;

// Counts operator new on threads that ask for it (steady-state test). ASan
// replaces operator new itself; there the test is skipped.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STALLSCOPE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(STALLSCOPE_ASAN)
#define STALLSCOPE_COUNT_ALLOCS 0
#else
#define STALLSCOPE_COUNT_ALLOCS 1
#endif
namespace {
thread_local bool t_count_allocs = false;
std::atomic<int> g_allocs{0};
boost::test_tools::assertion_result can_count_allocs(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(STALLSCOPE_COUNT_ALLOCS != 0);
  r.message() << "operator new is AddressSanitizer's in this build";
  return r;
}
}  // namespace

#if STALLSCOPE_COUNT_ALLOCS
void* operator new(std::size_t n) {
  if (t_count_allocs) g_allocs.fetch_add(1);
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

// Everything the sampler emitted, in order.
struct Collect {
  std::mutex mu;
  std::vector<std::tuple<std::string, double, uint64_t>> all;
  CounterSink sink() {
    return [this](const char* name, double v, uint64_t subject) {
      std::lock_guard<std::mutex> lk(mu);
      all.emplace_back(name, v, subject);
    };
  }
  // Values of `name` in order: of one subject, or of all.
  std::vector<double> values(const std::string& name,
                             std::optional<uint64_t> subject = std::nullopt) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<double> out;
    for (const auto& [n, v, s] : all) {
      if (n == name && (!subject || s == *subject)) out.push_back(v);
    }
    return out;
  }
  // Options of a sampler at `period_ms` that collects into this.
  SamplerOptions options(int period_ms) {
    SamplerOptions o;
    o.sink = sink();
    o.period_ms = period_ms;
    return o;
  }
  std::set<uint64_t> subjects(const std::string& name) {
    std::lock_guard<std::mutex> lk(mu);
    std::set<uint64_t> out;
    for (const auto& [n, v, s] : all) {
      if (n == name) out.insert(s);
    }
    return out;
  }
};

uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void burn_cpu(clockid_t c, uint64_t ns) {
  const uint64_t start = clock_ns(c);
  while (clock_ns(c) - start < ns) {
  }
}

// A thread that reports its tid and parks, blocked on a condition variable
// (its CPU clock stands still), running `body` each time it is told to.
struct Worker {
  std::mutex m;
  std::condition_variable cv;
  int phase = 0;  // 0 parked, 1 run body, 2 body done, 3 quit
  std::atomic<pid_t> tid{0};
  std::function<void()> body;
  std::thread th;
  explicit Worker(std::function<void()> b) : body(std::move(b)) {
    th = std::thread([this] {
      tid = ::gettid();
      std::unique_lock<std::mutex> lk(m);
      for (;;) {
        cv.wait(lk, [this] { return phase == 1 || phase == 3; });
        if (phase == 3) return;
        lk.unlock();
        body();
        lk.lock();
        phase = 2;
        cv.notify_all();
      }
    });
    while (tid.load() == 0) std::this_thread::sleep_for(1ms);
  }
  // Runs the body once on the worker (with an empty body: makes it run).
  void run_and_wait() {
    std::unique_lock<std::mutex> lk(m);
    phase = 1;
    cv.notify_all();
    cv.wait(lk, [this] { return phase == 2; });
  }
  ~Worker() {
    {
      std::lock_guard<std::mutex> lk(m);
      phase = 3;
    }
    cv.notify_all();
    th.join();
  }
};

SamplerOptions options(Collect& c) {
  SamplerOptions o;
  o.sink = c.sink();
  o.relist_ms = 0;
  o.fault_every = 1;
  o.idle_every = 1;
  return o;
}

struct FakeProc {
  fs::path root;
  FakeProc() {
    char tmpl[] = "/tmp/stallscope-sampler-XXXXXX";
    root = ::mkdtemp(tmpl);
  }
  ~FakeProc() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  // Rewrites in place (same inode), as the sampler keeps files open.
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel, std::ios::trunc) << text;
  }
};

std::string cpu_line(int cpu, uint64_t busy, uint64_t idle, uint64_t iowait) {
  return "cpu" + std::to_string(cpu) + " " + std::to_string(busy) + " 0 0 " + std::to_string(idle) +
         " " + std::to_string(iowait) + " 0 0 0 0 0\n";
}

std::vector<int> my_affinity() {
  std::vector<int> cpus;
  AffinityReader().read(::getpid(), cpus);
  return cpus;
}

// Runs `body` in a forked child; true when it exits 0 within 20 s.
template <class Body>
bool in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  for (int i = 0; i < 2000; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) != pid) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    BOOST_TEST_MESSAGE("child exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return false;
}

// Polls `pred` until it holds or 10 s pass (a hang guard: what the cases
// wait for takes milliseconds on a quiet machine).
template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// The scheduler state of one of this process's threads ('S': sleeping).
char thread_state(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() ? text[paren + 2] : '?';
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cpu_sampler)

BOOST_AUTO_TEST_CASE(busy_thread_grows_by_its_cpu_time_sleeping_thread_does_not) {
  Collect c;
  CpuSampler s(options(c));
  uint64_t busy_self_ns = 0;
  Worker busy([&] {
    const uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    burn_cpu(CLOCK_THREAD_CPUTIME_ID, 200'000'000);
    busy_self_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
  });
  Worker sleeper([] { std::this_thread::sleep_for(200ms); });
  s.sample_once();
  busy.run_and_wait();
  sleeper.run_and_wait();
  s.sample_once();
  const auto b = c.values("cpu.thread_ns", static_cast<uint64_t>(busy.tid.load()));
  BOOST_REQUIRE_EQUAL(b.size(), 2u);
  const double sampled = b[1] - b[0];
  BOOST_TEST_MESSAGE("busy: sampled " << sampled / 1e6 << " ms, own clock " << busy_self_ns / 1e6
                                      << " ms");
  BOOST_TEST(sampled >= double(busy_self_ns));
  BOOST_TEST(sampled <= double(busy_self_ns) * 1.05 + 10e6);
  const auto z = c.values("cpu.thread_ns", static_cast<uint64_t>(sleeper.tid.load()));
  BOOST_REQUIRE(!z.empty());
  BOOST_TEST(z.back() - z.front() < 2e6);  // woke once, slept, ran ~nothing
  // The calling thread is the sampler here: not sampled as a thread.
  BOOST_TEST(c.values("cpu.thread_ns", static_cast<uint64_t>(::gettid())).empty());
}

BOOST_AUTO_TEST_CASE(unchanged_threads_cost_no_events_process_counters_always) {
  Collect c;
  CpuSampler s(options(c));
  for (int i = 0; i < 3; ++i) s.sample_once();
  Worker parked([] {});  // appears after the first fault pass, never runs
  BOOST_REQUIRE(eventually([&] { return thread_state(parked.tid.load()) == 'S'; }));  // in its wait
  for (int i = 0; i < 5; ++i) s.sample_once();
  BOOST_TEST(c.values("cpu.process_ns").size() == 8u);
  BOOST_TEST(c.values("sampler.cpu_ns").size() == 8u);
  const auto tid = static_cast<uint64_t>(parked.tid.load());
  BOOST_TEST(c.values("cpu.thread_ns", tid).size() == 1u);  // first sight only
  BOOST_TEST(c.values("faults.major", tid).size() <= 1u);   // none unless the total moved
  parked.run_and_wait();
  s.sample_once();
  BOOST_TEST(c.values("cpu.thread_ns", tid).size() == 2u);  // it ran: one more
}

BOOST_AUTO_TEST_CASE(forked_child_cpu_shows_in_child_ns) {
  Collect c;
  CpuSampler s(options(c));
  int ready[2], go[2];
  BOOST_REQUIRE(::pipe(ready) == 0 && ::pipe(go) == 0);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    char x = 'r';
    burn_cpu(CLOCK_PROCESS_CPUTIME_ID, 150'000'000);
    (void)::write(ready[1], &x, 1);
    (void)::read(go[0], &x, 1);
    burn_cpu(CLOCK_PROCESS_CPUTIME_ID, 100'000'000);
    (void)::write(ready[1], &x, 1);
    ::pause();
    ::_exit(0);
  }
  char x;
  BOOST_REQUIRE(::read(ready[0], &x, 1) == 1);
  s.sample_once();
  const auto first = c.values("cpu.child_ns", static_cast<uint64_t>(pid));
  BOOST_REQUIRE_EQUAL(first.size(), 1u);
  BOOST_TEST(first[0] >= 150e6);
  BOOST_REQUIRE(::write(go[1], &x, 1) == 1);
  BOOST_REQUIRE(::read(ready[0], &x, 1) == 1);
  s.sample_once();
  const auto second = c.values("cpu.child_ns", static_cast<uint64_t>(pid));
  BOOST_REQUIRE_EQUAL(second.size(), 2u);
  BOOST_TEST(second[1] - second[0] >= 100e6);
  BOOST_TEST(second[1] - second[0] < 150e6);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  s.sample_once();  // reaped: dropped without an event
  s.sample_once();
  BOOST_TEST(c.values("cpu.child_ns", static_cast<uint64_t>(pid)).size() == 2u);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

BOOST_AUTO_TEST_CASE(running_sampler_emits_every_tick_within_bounds) {
  Collect c;
  CpuSampler s(c.options(10));
  Worker busy([] { burn_cpu(CLOCK_THREAD_CPUTIME_ID, 150'000'000); });
  s.start();
  s.start();  // idempotent
  // A first tick before busy runs, and two after it: its whole burn is seen.
  BOOST_REQUIRE(eventually([&] { return s.stats().samples >= 1; }));
  busy.run_and_wait();
  const uint64_t after = std::max<uint64_t>(10, s.stats().samples + 2);
  BOOST_REQUIRE(eventually([&] { return s.stats().samples >= after; }));
  s.stop();
  const SamplerStats st = s.stats();
  BOOST_TEST_MESSAGE("samples " << st.samples << " own cpu " << st.own_cpu_ns / 1e3 << " us wall "
                                << st.wall_ns / 1e6 << " ms threads " << st.threads);
  BOOST_TEST(st.samples >= 10u);
  BOOST_TEST(st.errors == 0u);
  BOOST_TEST(st.own_cpu_ns > 0u);
  BOOST_TEST(c.values("cpu.process_ns").size() == st.samples);
  BOOST_TEST(c.values("sampler.cpu_ns").size() == st.samples);
  const auto b = c.values("cpu.thread_ns", static_cast<uint64_t>(busy.tid.load()));
  BOOST_REQUIRE(b.size() >= 2u);
  for (size_t i = 1; i < b.size(); ++i) BOOST_TEST(b[i] > b[i - 1]);  // only changes emitted
  BOOST_TEST(b.back() - b.front() >= 100e6);
  const auto idle = c.values("cpu.idle");
  const double ncpu = static_cast<double>(my_affinity().size());
  // Default: /proc/stat every 5th tick at 10 ms, a value from the second read on.
  BOOST_TEST(idle.size() + 2 >= st.samples / 5);
  BOOST_TEST(idle.size() <= st.samples / 5 + 1);
  for (const double v : idle) BOOST_TEST((v >= 0.0 && v <= ncpu), v);
  BOOST_TEST(c.subjects("cpu.idle") == std::set<uint64_t>{0});
}

// Relisting every tick, a fault pass and /proc/stat every tick: once the
// tables and buffers have their size, a tick allocates nothing.
BOOST_AUTO_TEST_CASE(steady_state_ticks_do_not_allocate,
                     *boost::unit_test::precondition(can_count_allocs)) {
  SamplerOptions o;
  o.relist_ms = 0;
  o.fault_every = 1;
  o.idle_every = 1;
  o.sink = [](const char*, double, uint64_t) {};
  CpuSampler s(std::move(o));
  Worker a([] {}), b([] {});
  for (int i = 0; i < 5; ++i) s.sample_once();
  g_allocs = 0;
  t_count_allocs = true;
  for (int i = 0; i < 50; ++i) s.sample_once();
  t_count_allocs = false;
  BOOST_TEST(g_allocs.load() == 0);
}

// set_period_ms: the running thread takes a sample at once and then keeps
// the new period; sampler.period_ms marks each period, and the automatic
// fault and /proc/stat cadences follow it. At the old period (60 s) neither
// the sample at once nor ten more could come within the waits' 10 s limits;
// at the new one they take ~100 ms.
BOOST_AUTO_TEST_CASE(set_period_takes_effect_at_once) {
  Collect c;
  CpuSampler s(c.options(60000));
  s.start();
  BOOST_REQUIRE(eventually([&] { return s.stats().samples >= 1; }));  // the first tick only
  s.set_period_ms(60000);  // unchanged: no extra tick (a loaded machine only delays ticks)
  std::this_thread::sleep_for(50ms);
  BOOST_TEST(s.stats().samples == 1u);
  const auto t0 = std::chrono::steady_clock::now();
  s.set_period_ms(10);
  BOOST_TEST(s.period_ms() == 10);
  BOOST_TEST(eventually([&] { return s.stats().samples >= 2; }));   // a sample at once
  BOOST_TEST(eventually([&] { return s.stats().samples >= 12; }));  // then every 10 ms
  s.stop();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t n = s.stats().samples;
  BOOST_TEST_MESSAGE("samples " << n << " in " << ms << " ms");
  BOOST_TEST(static_cast<double>(n) <= 3 + ms / 10);  // never faster than the period
  BOOST_TEST(c.values("sampler.period_ms") == (std::vector<double>{60000, 10}));
  // /proc/stat: read at the first tick of each period, then every 5th at 10 ms.
  const size_t idle_reads = c.values("cpu.idle").size();
  BOOST_TEST(idle_reads <= (n - 1) / 5 + 1);
  CpuSampler clamped(SamplerOptions{});
  clamped.set_period_ms(0);
  BOOST_TEST(clamped.period_ms() == 1);
  clamped.set_period_ms(1 << 30);
  BOOST_TEST(clamped.period_ms() == 60000);
}

// stop() wakes the sampler rather than waiting out its period: at 60 s, a
// stop that waited could not return within the 10 s hang guard.
BOOST_AUTO_TEST_CASE(stop_wakes_the_sampler_instead_of_waiting_out_its_period) {
  for (const int period_ms : {10, 60000}) {
    SamplerOptions o;
    o.period_ms = period_ms;
    CpuSampler s(std::move(o));
    s.start();
    BOOST_REQUIRE(eventually([&] { return s.stats().samples >= 1; }));  // asleep in its wait
    const auto t0 = std::chrono::steady_clock::now();
    s.stop();
    const auto took = std::chrono::steady_clock::now() - t0;
    const double took_ms = std::chrono::duration<double, std::milli>(took).count();
    BOOST_TEST_MESSAGE("period " << period_ms << " ms: stop took " << took_ms << " ms");
    BOOST_TEST(took < 10s);
    s.stop();   // again: no-op
    s.start();  // and restartable
    s.stop();
  }
  CpuSampler never_started(SamplerOptions{});
  never_started.stop();
}

BOOST_AUTO_TEST_CASE(sampler_thread_is_named_and_blocks_all_signals) {
  CpuSampler s(SamplerOptions{});
  s.start();
  std::string status;
  auto find_status = [&status] {
    for (const auto& e : fs::directory_iterator("/proc/self/task")) {
      std::ifstream comm(e.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name != "stallscope-samp") continue;
      std::ifstream st(e.path() / "status");
      for (std::string line; std::getline(st, line);) {
        if (line.rfind("SigBlk:", 0) == 0) status = line;
      }
    }
    return !status.empty();
  };
  BOOST_TEST(eventually([&] { return s.stats().samples >= 1 && find_status(); }));
  s.stop();
  BOOST_REQUIRE(!status.empty());
  const uint64_t blocked = std::stoull(status.substr(7), nullptr, 16);
  for (int sig = 1; sig < 32; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    BOOST_TEST((blocked >> (sig - 1)) & 1u, "signal " << sig);
  }
}

BOOST_AUTO_TEST_CASE(proc_stat_parsing_and_idle_count) {
  std::vector<CpuJiffies> a(4), b(4);
  const std::string t1 = "cpu  9 9 9 9 9 9 9 9 0 0\n" + cpu_line(0, 100, 50, 10) +
                         cpu_line(1, 100, 50, 0) + cpu_line(3, 10, 10, 0) + "intr 1 2 3\n";
  BOOST_TEST(parse_proc_stat_cpus(t1, a));
  BOOST_TEST(a[0].idle == 60u);
  BOOST_TEST(a[0].total == 160u);
  BOOST_TEST(!a[2].seen);
  const std::string t2 =
      cpu_line(0, 101, 53, 10) + cpu_line(1, 104, 50, 0) + cpu_line(3, 10, 14, 0) + "intr 1\n";
  BOOST_TEST(parse_proc_stat_cpus(t2, b));
  // CPU 0: 3 of 4 idle, CPU 1: 0 of 4, CPU 3: 4 of 4, CPU 2 absent.
  BOOST_TEST(idle_cpus_between(a, b, {0, 1, 2, 3}).value() == 1.75,
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(idle_cpus_between(a, b, {3}).value() == 1.0);
  BOOST_TEST(idle_cpus_between(a, b, {1}).value() == 0.0);
  BOOST_TEST(!idle_cpus_between(a, a, {0, 1}));  // no time passed
  BOOST_TEST(!idle_cpus_between(b, a, {0, 1}));  // went backwards: no data
  // A cut-off last line is reported as incomplete.
  BOOST_TEST(!parse_proc_stat_cpus(cpu_line(0, 1, 1, 1) + "cpu1 5 5", a));
  BOOST_TEST(!parse_proc_stat_cpus("garbage", a));
  BOOST_TEST(parse_proc_stat_cpus("cpu0 x y\ncpuX 1 2 3 4\nintr\n", a));
  BOOST_TEST(!a[0].seen);
}

BOOST_AUTO_TEST_CASE(fake_proc_stat_through_the_sampler_with_a_growing_buffer) {
  FakeProc p;
  const std::vector<int> cpus = my_affinity();
  BOOST_REQUIRE(!cpus.empty());
  // 600 CPU lines (> the first 8 KiB buffer) before the interrupt line.
  auto stat = [&](uint64_t busy, uint64_t idle) {
    std::string s = "cpu  1 1 1 1 1 1 1 1 0 0\n";
    for (int c = 0; c < 600; ++c) s += cpu_line(c, busy, idle, 0);
    return s + "intr " + std::string(20000, '1') + "\nctxt 5\n";
  };
  p.write("stat", stat(100, 100));
  Collect c;
  SamplerOptions o = options(c);
  o.paths.proc = p.root.string();
  CpuSampler s(std::move(o));
  s.sample_once();
  BOOST_TEST(c.values("cpu.idle").empty());  // needs a baseline
  p.write("stat", stat(101, 103));           // 3 of 4 jiffies idle on every CPU
  s.sample_once();
  p.write("stat", stat(101, 103));  // no jiffy passed: last value repeated
  s.sample_once();
  const auto idle = c.values("cpu.idle");
  BOOST_REQUIRE_EQUAL(idle.size(), 2u);
  BOOST_TEST(idle[0] == 0.75 * static_cast<double>(cpus.size()));
  BOOST_TEST(idle[1] == idle[0]);
  // No task directory in this tree: no thread events, process ones still.
  BOOST_TEST(c.subjects("cpu.thread_ns").empty());
  BOOST_TEST(c.values("cpu.process_ns").size() == 3u);
}

BOOST_AUTO_TEST_CASE(idle_every_n_ticks_covers_the_whole_window) {
  FakeProc p;
  const auto ncpu = static_cast<double>(my_affinity().size());
  auto stat = [](uint64_t busy, uint64_t idle) {
    std::string s;
    for (int c = 0; c < 256; ++c) s += cpu_line(c, busy, idle, 0);
    return s + "intr 0\n";
  };
  Collect c;
  SamplerOptions o = options(c);
  o.paths.proc = p.root.string();
  o.idle_every = 3;
  CpuSampler s(std::move(o));
  for (uint64_t tick = 0; tick < 7; ++tick) {
    // Busy on even ticks, idle on odd ones: 1 jiffy each.
    p.write("stat", stat(100 + (tick + 1) / 2, 100 + tick / 2));
    s.sample_once();
  }
  // Read at ticks 0, 3, 6: windows 0..3 (1 idle jiffy of 3) and 3..6 (2 of 3).
  const auto idle = c.values("cpu.idle");
  BOOST_REQUIRE_EQUAL(idle.size(), 2u);
  BOOST_TEST(idle[0] == ncpu * 1.0 / 3.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(idle[1] == ncpu * 2.0 / 3.0, boost::test_tools::tolerance(1e-9));
}

// Throttling counters change once per CFS period: read at that pace.
BOOST_AUTO_TEST_CASE(cgroup_throttling_is_read_once_per_cfs_period) {
  for (const int cfs_period_us : {100000, 20000}) {
    FakeProc p;
    p.write("proc/self/cgroup", "0::/job\n");
    p.write("cgroup/job/cpu.max", "50000 " + std::to_string(cfs_period_us) + "\n");
    Collect c;
    SamplerOptions o = options(c);
    o.paths.proc = (p.root / "proc").string();
    o.paths.cgroup = (p.root / "cgroup").string();
    CpuSampler s(std::move(o));
    for (int tick = 0; tick < 25; ++tick) {
      p.write("cgroup/job/cpu.stat", "nr_periods 50\nnr_throttled " + std::to_string(tick) +
                                         "\nthrottled_usec " + std::to_string(tick * 3) + "\n");
      s.sample_once();
    }
    const int every = cfs_period_us / 10000;  // ticks of 10 ms per CFS period
    std::vector<double> want_n, want_ns;
    for (int tick = 0; tick < 25; tick += every) {
      want_n.push_back(tick);
      want_ns.push_back(tick * 3000.0);
    }
    BOOST_TEST(c.values("cgroup.nr_throttled") == want_n, boost::test_tools::per_element());
    BOOST_TEST(c.values("cgroup.throttled_ns") == want_ns, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(major_faults_from_task_stat_files) {
  FakeProc p;
  Worker w([] {});
  const pid_t tid = w.tid.load();
  auto stat = [&](int majflt) {
    // comm with ") (": fields count from the last ')'.
    return std::to_string(tid) + " (a) (b) S 1 1 1 0 -1 0 7 0 " + std::to_string(majflt) +
           " 0 1 1 0 0 20 0 1 0 5 0 0\n";
  };
  p.write("self/task/" + std::to_string(tid) + "/stat", stat(5));
  p.write("stat", cpu_line(0, 1, 1, 1) + "intr 0\n");
  Collect c;
  SamplerOptions o = options(c);
  o.paths.proc = p.root.string();
  o.relist_ms = 60000;  // listed once; the stat file stays open
  CpuSampler s(std::move(o));
  s.sample_once();
  p.write("self/task/" + std::to_string(tid) + "/stat", stat(9));
  w.run_and_wait();  // faults are read only for threads that ran
  s.sample_once();
  w.run_and_wait();
  s.sample_once();  // unchanged: no event
  const auto f = c.values("faults.major", static_cast<uint64_t>(tid));
  BOOST_TEST(f == (std::vector<double>{5, 9}), boost::test_tools::per_element());
  BOOST_TEST(c.values("cpu.thread_ns", static_cast<uint64_t>(tid)).size() >= 1u);
}

// Per-thread stat files are read only when the process total moved.
BOOST_AUTO_TEST_CASE(thread_faults_are_read_only_when_the_process_total_moves) {
  FakeProc p;
  Worker w([] {});
  const std::string file = "self/task/" + std::to_string(w.tid.load()) + "/stat";
  auto stat = [](int majflt) {
    return "1 (x) S 1 1 1 0 -1 0 7 0 " + std::to_string(majflt) + " 0\n";
  };
  Collect c;
  SamplerOptions o = options(c);
  o.paths.proc = p.root.string();
  o.relist_ms = 60000;
  p.write("self/stat", stat(5));
  p.write(file, stat(5));
  CpuSampler s(std::move(o));
  s.sample_once();  // first pass reads every thread
  p.write(file, stat(7));
  w.run_and_wait();
  s.sample_once();  // total still 5: the thread's file is not read
  p.write("self/stat", stat(7));
  w.run_and_wait();
  s.sample_once();
  const auto f = c.values("faults.major", static_cast<uint64_t>(w.tid.load()));
  BOOST_TEST(f == (std::vector<double>{5, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(faults_are_read_every_nth_tick) {
  Collect c;
  SamplerOptions o = options(c);
  o.fault_every = 4;
  FakeProc p;
  Worker w([] {});
  const std::string file = "self/task/" + std::to_string(w.tid.load()) + "/stat";
  o.paths.proc = p.root.string();
  p.write(file, "1 (x) S 1 1 1 0 -1 0 7 0 1 0\n");
  CpuSampler s(std::move(o));
  for (int i = 0; i < 8; ++i) {
    p.write(file, "1 (x) S 1 1 1 0 -1 0 7 0 " + std::to_string(i + 1) + " 0\n");
    w.run_and_wait();  // faults are read only for threads that ran
    s.sample_once();
  }
  const auto f = c.values("faults.major", static_cast<uint64_t>(w.tid.load()));
  BOOST_TEST(f == (std::vector<double>{1, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_thread_exiting_between_ticks_is_dropped) {
  for (const int relist_ms : {0, 60000}) {
    Collect c;
    SamplerOptions o = options(c);
    o.relist_ms = relist_ms;
    CpuSampler s(std::move(o));
    pid_t tid = 0;
    {
      Worker w([] { burn_cpu(CLOCK_THREAD_CPUTIME_ID, 5'000'000); });
      tid = w.tid.load();
      s.sample_once();
      w.run_and_wait();
    }  // joined; the kernel may list it a moment longer (longer on a loaded machine)
    const std::string task = "/proc/self/task/" + std::to_string(tid);
    BOOST_REQUIRE(eventually([&] { return !fs::exists(task); }));
    s.sample_once();
    s.sample_once();
    BOOST_TEST(c.values("cpu.thread_ns", static_cast<uint64_t>(tid)).size() == 1u);
    BOOST_TEST(s.stats().errors == 0u);
  }
  // Churn: threads start and die while a fast sampler runs.
  Collect c;
  SamplerOptions o = options(c);
  o.period_ms = 1;
  CpuSampler s(std::move(o));
  s.start();
  for (int i = 0; i < 300; ++i)
    std::thread([] { burn_cpu(CLOCK_THREAD_CPUTIME_ID, 50'000); }).join();
  BOOST_TEST(eventually([&] { return s.stats().samples > 0; }));
  s.stop();
  BOOST_TEST(s.stats().errors == 0u);
  BOOST_TEST(s.stats().samples > 0u);
}

BOOST_AUTO_TEST_CASE(no_proc_records_no_thread_data_and_does_not_crash) {
  Collect c;
  SamplerOptions o = options(c);
  o.paths.proc = "/nonexistent-proc";
  o.paths.cgroup = "/nonexistent-cgroup";
  o.period_ms = 1;
  CpuSampler s(std::move(o));
  s.sample_once();
  s.start();
  std::this_thread::sleep_for(20ms);
  s.stop();
  BOOST_TEST(c.subjects("cpu.thread_ns").empty());
  BOOST_TEST(c.subjects("faults.major").empty());
  BOOST_TEST(c.subjects("cpu.child_ns").empty());
  BOOST_TEST(c.values("cpu.idle").empty());
  BOOST_TEST(c.values("cgroup.nr_throttled").empty());
  BOOST_TEST(c.values("cpu.process_ns").size() == s.stats().samples);  // from a clock, not /proc
}

int count_open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n - 1;  // the iterator's own descriptor
}

// The program has used up its descriptors: threads that appear now still get
// their CPU time (a clock needs no descriptor), only their faults are skipped.
BOOST_AUTO_TEST_CASE(fd_exhaustion_skips_faults_keeps_clocks) {
  const bool ok = in_child([] {
    Collect c;
    CpuSampler s(options(c));
    s.sample_once();  // task dir, /proc/stat, cpu.stat open
    // Threads the sampler has not listed yet (started before the exhaustion:
    // sanitizer runtimes need descriptors to start threads).
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < 20; ++i) workers.push_back(std::make_unique<Worker>([] {}));
    const rlimit lim{static_cast<rlim_t>(count_open_fds() + 8),
                     static_cast<rlim_t>(count_open_fds() + 8)};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 10;
    std::vector<int> fillers;  // the program takes every descriptor left
    for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) fillers.push_back(fd);
    if (errno != EMFILE) return 11;
    s.sample_once();
    s.sample_once();
    int rc = s.stats().errors == 0 ? 0 : 14;
    for (const auto& w : workers) {
      const auto tid = static_cast<uint64_t>(w->tid.load());
      if (c.values("cpu.thread_ns", tid).empty()) rc = 12;
      if (!c.values("faults.major", tid).empty()) rc = 13;
    }
    for (const int fd : fillers) ::close(fd);  // before threads end (sanitizer runtimes)
    return rc;
  });
  BOOST_TEST(ok);
}

// A program with many threads and a small descriptor limit: the sampler keeps
// at most 1/8 of the limit open and still reads every thread's faults.
BOOST_AUTO_TEST_CASE(kept_descriptors_are_capped_by_the_limit) {
  const bool ok = in_child([] {
    const rlimit lim{64, 64};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 10;
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < 30; ++i) workers.push_back(std::make_unique<Worker>([] {}));
    const int before = count_open_fds();
    Collect c;
    CpuSampler s(options(c));
    s.sample_once();
    s.sample_once();
    const int used = count_open_fds() - before;
    // 8 stat files + the task dir, /proc/self/stat, /proc/stat, cpu.stat.
    if (used > 64 / 8 + 4) return 11;
    for (const auto& w : workers) {
      if (c.values("faults.major", static_cast<uint64_t>(w->tid.load())).empty()) return 12;
    }
    return 0;
  });
  BOOST_TEST(ok);
}

// RELIABILITY.md 5: the program closes every descriptor and reuses the
// numbers; the sampler must never close (or read as its own) the program's files.
BOOST_AUTO_TEST_CASE(program_closing_all_fds_keeps_its_files_safe) {
  const bool ok = in_child([] {
    Worker w([] {});
    Collect c;
    {
      CpuSampler s(options(c));
      s.sample_once();  // opens the task dir, /proc/stat, stat files
      ::close_range(3, ~0u, 0);
      std::vector<int> mine;
      for (int i = 0; i < 32; ++i) mine.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      s.sample_once();  // notices and reopens its own
      s.sample_once();
      for (const int fd : mine) {
        if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return 20;
      }
      if (c.values("cpu.thread_ns", static_cast<uint64_t>(w.tid.load())).empty()) return 21;
    }  // the sampler is destroyed: closes only what is still its own
    for (int fd = 3; fd < 3 + 32; ++fd) {
      if (::fcntl(fd, F_GETFD) < 0) return 22;
    }
    return 0;
  });
  BOOST_TEST(ok);
}

BOOST_AUTO_TEST_CASE(a_throwing_sink_loses_ticks_not_the_process) {
  SamplerOptions o;
  o.period_ms = 1;
  o.sink = [](const char*, double, uint64_t) { throw std::runtime_error("sink"); };
  CpuSampler s(std::move(o));
  s.start();
  BOOST_TEST(eventually([&] { return s.stats().errors > 0; }));
  s.stop();
  BOOST_TEST(s.stats().samples == 0u);
  BOOST_TEST(s.stats().errors > 0u);
}

BOOST_AUTO_TEST_CASE(a_forked_child_can_drop_a_running_sampler) {
  Collect c;
  SamplerOptions o = options(c);
  o.period_ms = 1;
  CpuSampler s(std::move(o));
  s.start();
  BOOST_REQUIRE(eventually([&] { return s.stats().samples > 0; }));  // it is running
  const bool ok = in_child([&s] {
    s.stop();  // must neither hang nor join a thread that does not exist here
    return 0;
  });
  BOOST_TEST(ok);
  s.stop();
  BOOST_TEST(s.stats().samples > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
