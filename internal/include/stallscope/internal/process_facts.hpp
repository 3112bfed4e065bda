// Process and machine facts recorded once per process in the metadata
// record: identity, CPU affinity, cgroup CPU quota, online cores.
//
//   sys::ProcessFacts f = sys::collect_process_facts();   // never throws
//   double cpus = f.usable_cpus();                        // e.g. 1.5 under a quota
//   std::string meta = sys::to_json(f).dump();            // flat object, below
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace stallscope::sys {

// Roots of the pseudo file systems; tests point them at fake trees.
struct SysPaths {
  std::string proc = "/proc";
  std::string cgroup = "/sys/fs/cgroup";
  std::string sys_cpu = "/sys/devices/system/cpu";
};

struct CgroupCpu {
  int version = 0;   // 1, 2, or 0 when no CPU controller was found
  std::string path;  // the process's cgroup directory for cpu (file system path)
  // The directory whose quota applies: `path`, or the ancestor with the
  // tightest limit (a limit set on a parent binds its children too).
  // cpu.stat is read here, where the throttling is accounted.
  std::string limit_path;
  int64_t quota_us = -1;  // -1 = no limit
  int64_t period_us = 0;
  double quota_cores() const {
    return quota_us > 0 && period_us > 0 ? double(quota_us) / period_us : -1.0;
  }
  // cpu.stat throttling (v1 throttled_time ns, v2 throttled_usec * 1000)
  int64_t nr_periods = 0;
  int64_t nr_throttled = 0;
  int64_t throttled_ns = 0;
};

// Reads the CPU controller of the calling process from /proc/self/cgroup
// and the cgroup file system (v2 cpu.max / cpu.stat; v1 cpu.cfs_quota_us,
// cpu.cfs_period_us, cpu.stat). A v1 line naming the cpu controller wins
// over the v2 line (hybrid hosts). The v1 hierarchy is looked for at
// <cgroup>/<controllers as listed>, <cgroup>/cpu,cpuacct and <cgroup>/cpu;
// when the listed path does not exist under the mount (inside a container)
// the mount root is used. Missing files leave defaults; never throws.
CgroupCpu read_cgroup_cpu(const SysPaths& paths = {});
// Re-reads only the cpu.stat counters of an already located cgroup.
void refresh_cgroup_stat(CgroupCpu& cg);
// Parses cpu.stat text of the given version into cg's counters (fields
// absent from the text keep their values).
void parse_cgroup_cpu_stat(std::string_view text, int version, CgroupCpu& cg);
// The cpu.stat file of a located cgroup ("" when none).
std::string cgroup_cpu_stat_file(const CgroupCpu& cg);

struct ProcessFacts {
  int pid = 0;
  int parent_pid = 0;
  std::string host;
  std::string comm;  // /proc/self/comm
  std::vector<std::string> cmdline;
  std::string exe;
  std::vector<int> affinity;  // CPUs the process may run on
  int online_cpus = 0;
  CgroupCpu cgroup;
  uint64_t start_time_ticks = 0;  // /proc/self/stat field 22
  std::string boot_id;            // /proc/sys/kernel/random/boot_id
  // min(affinity count, cgroup quota cores when limited): the CPUs this
  // process can really use. Falls back to online_cpus, then 1, when the
  // affinity could not be read.
  double usable_cpus() const;
};

// Reads everything above. Every read may fail: its field keeps the default
// (0, "", empty); never throws, never crashes.
ProcessFacts collect_process_facts(const SysPaths& paths = {});

// A flat JSON object (strings made valid UTF-8, so dump() never throws):
//   pid, ppid, host, comm, exe, boot_id            numbers / strings
//   cmdline                                        array of strings
//   start_time_ticks, clk_tck                      /proc/self/stat field 22, its unit (Hz)
//   affinity ("0-3,8", CPU list), affinity_count, online_cpus, usable_cpus
//   cgroup_version (0, 1, 2), cgroup_path, cgroup_limit_path,
//   cgroup_quota_us (-1 = none), cgroup_period_us, cgroup_quota_cores (-1 = none),
//   cgroup_nr_periods, cgroup_nr_throttled, cgroup_throttled_ns
nlohmann::json to_json(const ProcessFacts& f);

}  // namespace stallscope::sys
