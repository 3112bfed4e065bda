// The CPU sampler's per-thread and per-child state. Both tables are
// re-listed now and then (threads come and go) and sampled every tick;
// sampling a listed entry is one syscall and allocates nothing.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sys/cpu_sampler.hpp"
#include "stallscope/internal/proc_text.hpp"

namespace stallscope::sys {

inline constexpr uint64_t kNoValue = ~uint64_t{0};

// The kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): a clock id that
// reads any thread of this process, without a pthread_t.
inline clockid_t thread_cpu_clock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
}

// Reads a CPU clock in ns; false when the thread or process is gone.
bool read_cpu_clock(clockid_t clock, uint64_t& ns);

// Threads of this process: /proc/self/task, kept open and re-read with
// getdents64 into a fixed buffer. For each thread its CPU clock and, up to a
// cap, an open /proc/self/task/<tid>/stat for major faults (threads past the
// cap open it for each read): the cap keeps a program with thousands of
// threads from running out of descriptors because of us.
class ThreadTable {
 public:
  // Threads listed without allocating (more: the table grows on the
  // sampling thread, which then gets a malloc arena of its own).
  static constexpr size_t kRoomThreads = 1024;
  // Opens <proc_root>/self/task. False when there is no /proc.
  bool open(const std::string& proc_root);
  int dir_fd() const { return dir_.get(); }
  // Re-lists the threads: drops the dead, adds the new, retries stat files
  // that could not be opened (fd exhaustion), and replaces descriptors the
  // program closed behind our back. Keeps the old table if listing fails.
  // `self` (the sampling thread) is listed but never sampled.
  void relist(pid_t self);
  // Threads that may have forked since the previous relist: new ones, ones
  // whose CPU clock moved, and `self`. Forking takes CPU time.
  const std::vector<pid_t>& ran_since_relist() const { return ran_; }
  const std::vector<pid_t>& listed() const { return tids_; }  // at the last listing
  // Emits cpu.thread_ns for every thread but `self` whose clock moved. With
  // read_faults, faults.major too — but only when the process's total in
  // /proc/self/stat moved since the last pass (major faults are rare; one
  // read instead of one per thread), and only for threads that ran since
  // their previous fault read (a thread that did not run cannot fault).
  // Threads found dead are dropped.
  void sample(const CounterSink& sink, pid_t self, bool read_faults);
  size_t size() const { return threads_.size(); }

 private:
  struct Thread {
    pid_t id = 0;  // tid
    clockid_t clock = 0;
    OwnedFd stat;  // kept open, or not (cap, fd exhaustion)
    uint64_t last_ns = kNoValue;
    uint64_t ns_at_relist = kNoValue;
    uint64_t ns_at_faults = kNoValue;
    uint64_t last_faults = kNoValue;
    bool gone = false;
  };
  bool list_tids();
  bool process_faults_moved();
  void keep_stat_open(Thread& t);
  void drop(Thread& t);
  void sample_faults(Thread& t, const CounterSink& sink);
  ssize_t read_stat(Thread& t);

  OwnedFd dir_;
  OwnedFd process_stat_;  // /proc/self/stat: the process's total major faults
  uint64_t process_faults_ = kNoValue;
  std::string proc_root_;
  std::vector<Thread> threads_;  // sorted by tid
  std::vector<pid_t> tids_;
  std::vector<pid_t> ran_;
  size_t kept_ = 0;
  size_t max_kept_ = 0;
  alignas(8) char dents_[16384];
  char text_[1024];
};

// Child processes of this process, from /proc/self/task/<tid>/children (the
// kernel files a child under the thread that forked it). Their CPU time
// comes from clock_getcpuclockid(pid). A child stays in the table until its
// clock can no longer be read (it was reaped). Without children files
// (kernels built without CONFIG_PROC_CHILDREN) there are none.
class ChildTable {
 public:
  // Adds the children of `tids` (threads that may have forked).
  void relist(int task_dir_fd, const std::vector<pid_t>& tids);
  // Emits cpu.child_ns for every child whose value changed.
  void sample(const CounterSink& sink);
  size_t size() const { return children_.size(); }
  // Room for `n` children made now, on the starting thread (ThreadTable::kRoomThreads).
  void reserve(size_t n) {
    children_.reserve(n);
    pids_.reserve(n);
  }

 private:
  struct Child {
    pid_t id = 0;  // pid
    clockid_t clock = 0;
    uint64_t last_ns = kNoValue;
    bool gone = false;
  };
  void read_children_of(int task_dir_fd, pid_t tid);

  std::vector<Child> children_;  // sorted by pid
  std::vector<pid_t> pids_;
  std::vector<char> text_ = std::vector<char>(16384);
  bool supported_ = true;
  bool probed_ = false;
};

}  // namespace stallscope::sys
