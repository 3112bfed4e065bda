// Fixtures of the CPU sampler's suites (test_cpu_sampler*.cpp): a sink
// that collects what the sampler emits, threads that burn or park on
// demand, fake /proc trees, and waits that poll for a state with a hang
// guard instead of sleeping a fixed time (RELIABILITY.md 38).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "sys/cpu_sampler.hpp"
#include "stallscope/internal/idle_cpus.hpp"

namespace cpu_sampler_test {

namespace fs = std::filesystem;
using namespace stallscope::sys;
using namespace std::chrono_literals;

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

inline uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

inline void burn_cpu(clockid_t c, uint64_t ns) {
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

inline SamplerOptions options(Collect& c) {
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

inline std::string cpu_line(int cpu, uint64_t busy, uint64_t idle, uint64_t iowait) {
  return "cpu" + std::to_string(cpu) + " " + std::to_string(busy) + " 0 0 " + std::to_string(idle) +
         " " + std::to_string(iowait) + " 0 0 0 0 0\n";
}

inline std::vector<int> my_affinity() {
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
inline char thread_state(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() ? text[paren + 2] : '?';
}

}  // namespace cpu_sampler_test
