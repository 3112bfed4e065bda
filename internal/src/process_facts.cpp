// Facts about the calling process, read once for the metadata record. Every
// read may fail (no /proc in a sandbox, a seccomp filter, a read-only
// container): the field then keeps its default.
#include "stallscope/internal/process_facts.hpp"

#include <limits.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "stallscope/internal/idle_cpus.hpp"
#include "stallscope/internal/proc_text.hpp"

namespace stallscope::sys {
namespace {

std::string read_host() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

std::string read_first_line(const std::string& path) {
  std::string text;
  if (!read_text_file(path, text, 4096)) return {};
  const std::string_view t = trim(text);
  return std::string(t.substr(0, t.find('\n')));
}

std::vector<std::string> read_cmdline(const std::string& path) {
  std::vector<std::string> args;
  std::string text;
  if (!read_text_file(path, text)) return args;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    args.emplace_back(text, start, end - start);
    start = end + 1;
  }
  return args;
}

std::string read_link(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return {};
  return std::string(buf, static_cast<size_t>(n));
}

int read_online_cpus(const SysPaths& p) {
  std::string text;
  if (read_text_file(p.sys_cpu + "/online", text, 65536)) {
    const auto cpus = parse_cpu_list(text);
    if (!cpus.empty()) return static_cast<int>(cpus.size());
  }
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 0;
}

uint64_t read_start_ticks(const std::string& stat_path) {
  std::string text;
  if (!read_text_file(stat_path, text, 4096)) return 0;
  return parse_uint64(stat_field(text, 22)).value_or(0);
}

// nlohmann::json::dump throws on invalid UTF-8, and comm, cmdline, exe and
// host are arbitrary bytes. nlohmann's own replacing dump is the validator,
// so what passes here is exactly what dump() later accepts.
std::string valid_utf8(const std::string& s) {
  if (std::all_of(s.begin(), s.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return s;
  }
  const std::string quoted =
      nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

}  // namespace

double ProcessFacts::usable_cpus() const {
  double cpus = !affinity.empty() ? double(affinity.size()) : online_cpus > 0 ? online_cpus : 1;
  const double quota = cgroup.quota_cores();
  return quota > 0 ? std::min(cpus, quota) : cpus;
}

ProcessFacts collect_process_facts(const SysPaths& paths) {
  ProcessFacts f;
  f.pid = static_cast<int>(::getpid());
  f.parent_pid = static_cast<int>(::getppid());
  try {
    const std::string self = paths.proc + "/self";
    f.host = read_host();
    f.comm = read_first_line(self + "/comm");
    f.cmdline = read_cmdline(self + "/cmdline");
    f.exe = read_link(self + "/exe");
    AffinityReader().read(0, f.affinity);
    f.online_cpus = read_online_cpus(paths);
    f.cgroup = read_cgroup_cpu(paths);
    f.start_time_ticks = read_start_ticks(self + "/stat");
    f.boot_id = read_first_line(paths.proc + "/sys/kernel/random/boot_id");
  } catch (...) {  // allocation failure: what was read so far stands
  }
  return f;
}

nlohmann::json to_json(const ProcessFacts& f) {
  nlohmann::json cmdline = nlohmann::json::array();
  for (const auto& a : f.cmdline) cmdline.push_back(valid_utf8(a));
  const CgroupCpu& cg = f.cgroup;
  return nlohmann::json{{"pid", f.pid},
                        {"ppid", f.parent_pid},
                        {"host", valid_utf8(f.host)},
                        {"comm", valid_utf8(f.comm)},
                        {"cmdline", std::move(cmdline)},
                        {"exe", valid_utf8(f.exe)},
                        {"boot_id", valid_utf8(f.boot_id)},
                        {"start_time_ticks", f.start_time_ticks},
                        {"clk_tck", ::sysconf(_SC_CLK_TCK)},
                        {"affinity", format_cpu_list(f.affinity)},
                        {"affinity_count", f.affinity.size()},
                        {"online_cpus", f.online_cpus},
                        {"usable_cpus", f.usable_cpus()},
                        {"cgroup_version", cg.version},
                        {"cgroup_path", valid_utf8(cg.path)},
                        {"cgroup_limit_path", valid_utf8(cg.limit_path)},
                        {"cgroup_quota_us", cg.quota_us},
                        {"cgroup_period_us", cg.period_us},
                        {"cgroup_quota_cores", cg.quota_cores()},
                        {"cgroup_nr_periods", cg.nr_periods},
                        {"cgroup_nr_throttled", cg.nr_throttled},
                        {"cgroup_throttled_ns", cg.throttled_ns}};
}

}  // namespace stallscope::sys
