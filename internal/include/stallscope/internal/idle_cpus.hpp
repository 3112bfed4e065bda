// Idle CPUs of the affinity set, from /proc/stat deltas, for the CPU sampler;
// and the affinity set itself.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/internal/proc_text.hpp"

namespace stallscope::sys {

// sched_getaffinity with a set sized for the machine (the fixed cpu_set_t
// holds 1024 CPUs; larger machines make the call fail with EINVAL). The set
// is allocated once, so repeated reads do not allocate.
class AffinityReader {
 public:
  AffinityReader() = default;
  ~AffinityReader();
  AffinityReader(const AffinityReader&) = delete;
  AffinityReader& operator=(const AffinityReader&) = delete;
  // CPUs `pid` (0 = calling thread) may run on, into `out`. False on error.
  bool read(pid_t pid, std::vector<int>& out);

 private:
  cpu_set_t* set_ = nullptr;
  int ncpus_ = 0;
};

struct CpuJiffies {
  uint64_t idle = 0;   // idle + iowait
  uint64_t total = 0;  // user + nice + system + idle + iowait + irq + softirq + steal
  bool seen = false;
};

// Parses the "cpuN …" lines of /proc/stat into `by_cpu`, indexed by N (lines
// for N >= by_cpu.size() are skipped; entries of CPUs not listed get
// seen = false). Returns true when the text holds the line after the last
// CPU line, i.e. no CPU line was cut off by a short buffer.
bool parse_proc_stat_cpus(std::string_view text, std::vector<CpuJiffies>& by_cpu);

// Idle CPUs among `cpus` between two snapshots, as a count:
// n × Σ Δidle / Σ Δtotal over the n CPUs seen in both. Pooling the deltas
// (rather than summing per-CPU ratios) copes with CPUs whose counters did
// not move in a short period: /proc/stat counts in 10 ms units (USER_HZ),
// the same as the default sampling period. nullopt when no time passed.
std::optional<double> idle_cpus_between(const std::vector<CpuJiffies>& prev,
                                        const std::vector<CpuJiffies>& cur,
                                        const std::vector<int>& cpus);

// Keeps <proc>/stat open and turns successive reads into idle-CPU counts.
class IdleCpuMeter {
 public:
  // Opens <proc_root>/stat. False (and sample() returns nullopt) on error.
  bool open(const std::string& proc_root);
  // The CPUs to count (the affinity set); sorted.
  void set_cpus(const std::vector<int>& cpus);
  // Idle CPUs since the previous call; nullopt on the first call, on a read
  // error, or when /proc/stat did not advance (then the previous value is
  // repeated if there is one).
  std::optional<double> sample();
  // Reopens /proc/stat if the program closed our descriptor (close_range)
  // and the number now names one of its files.
  void revalidate();

 private:
  bool read_snapshot();

  OwnedFd fd_;
  std::string root_;
  std::vector<char> buf_;
  std::vector<int> cpus_;
  std::vector<CpuJiffies> prev_, cur_;
  bool have_prev_ = false;
  std::optional<double> last_;
};

}  // namespace stallscope::sys
