// The CPU sampler against fake /proc and cgroup trees: /proc/stat parsing
// and idle CPUs, throttling read once per CFS period, major faults read
// only when they can have moved, no /proc at all, and the descriptor
// faults it must survive (exhaustion, a small limit, the program closing
// its descriptors). Every case calls sample_once(): none depends on a
// clock or on how fast the machine is.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "cpu_sampler_fixtures.hpp"

namespace fs = std::filesystem;
using namespace stallscope::sys;
using namespace cpu_sampler_test;

BOOST_AUTO_TEST_SUITE(cpu_sampler_proc)

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

namespace {

int count_open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n - 1;  // the iterator's own descriptor
}

}  // namespace

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

BOOST_AUTO_TEST_SUITE_END()
