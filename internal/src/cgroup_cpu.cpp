// The CPU controller of the calling process: where its cgroup is, the quota
// that binds it and how often it was throttled. Both cgroup versions; v1 may
// be mounted as cpu,cpuacct or cpu, and inside a container the path listed
// in /proc/self/cgroup may not exist under the mount.
#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>

#include "stallscope/internal/proc_text.hpp"
#include "stallscope/internal/process_facts.hpp"

namespace stallscope::sys {
namespace {

constexpr int kMaxDepth = 64;

struct ProcCgroup {
  std::optional<std::string> v1_controllers;  // e.g. "cpu,cpuacct"
  std::string v1_path;
  std::optional<std::string> v2_path;
};

bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == token) return true;
    if (comma == std::string_view::npos) break;
    list = list.substr(comma + 1);
  }
  return false;
}

// A path from /proc/self/cgroup is joined under the mount only when it
// cannot climb out of it (cgroup namespaces show "/../.." for outside).
bool safe_cgroup_path(std::string_view p) {
  if (p.empty() || p.front() != '/') return false;
  return p.find("/..") == std::string_view::npos && p.find(' ') == std::string_view::npos;
}

// "hierarchy-id:controllers:path" per line.
ProcCgroup parse_proc_cgroup(std::string_view text) {
  ProcCgroup out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view ctl = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(trim(line.substr(c2 + 1)));
    if (has_token(ctl, "cpu") && !out.v1_controllers) {
      out.v1_controllers = std::string(ctl);
      out.v1_path = path;
    } else if (line.substr(0, c1) == "0" && ctl.empty()) {
      out.v2_path = path;
    }
  }
  return out;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// The cgroup directory under `mount`, or the mount root when the listed path
// is not there; "" when `probe` exists in neither.
std::string locate_under(const std::string& mount, const std::string& path, const char* probe) {
  if (safe_cgroup_path(path)) {
    std::string dir = path == "/" ? mount : mount + path;
    if (exists(dir + "/" + probe)) return dir;
  }
  return exists(mount + "/" + probe) ? mount : std::string();
}

struct Limit {
  int64_t quota_us = -1;
  int64_t period_us = 0;
  double cores() const { return quota_us > 0 && period_us > 0 ? double(quota_us) / period_us : -1; }
};

Limit read_limit(const std::string& dir, int version) {
  Limit l;
  std::string text;
  if (version == 1) {
    if (read_text_file(dir + "/cpu.cfs_quota_us", text))
      l.quota_us = parse_int64(trim(text)).value_or(-1);
    if (read_text_file(dir + "/cpu.cfs_period_us", text))
      l.period_us = parse_int64(trim(text)).value_or(0);
  } else if (read_text_file(dir + "/cpu.max", text)) {  // "max 100000" or "200000 100000"
    const std::string_view t = trim(text);
    const size_t sp = t.find(' ');
    if (sp != std::string_view::npos) {
      l.quota_us = parse_int64(t.substr(0, sp)).value_or(-1);
      l.period_us = parse_int64(trim(t.substr(sp + 1))).value_or(0);
    }
  }
  if (l.quota_us <= 0) l.quota_us = -1;  // "max", -1, 0 or garbage: no limit
  if (l.period_us < 0) l.period_us = 0;
  return l;
}

std::string parent_dir(const std::string& dir) {
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string() : dir.substr(0, slash);
}

// A limit on any ancestor binds too: keep the tightest, from the process's
// own cgroup up to the mount root.
void apply_tightest_limit(CgroupCpu& cg, const std::string& mount) {
  std::string dir = cg.path;
  cg.limit_path = cg.path;
  for (int depth = 0; depth < kMaxDepth && !dir.empty(); ++depth) {
    const Limit l = read_limit(dir, cg.version);
    if (depth == 0) cg.period_us = l.period_us;
    if (l.cores() > 0 && (cg.quota_cores() < 0 || l.cores() < cg.quota_cores())) {
      cg.quota_us = l.quota_us;
      cg.period_us = l.period_us;
      cg.limit_path = dir;
    }
    if (dir.size() <= mount.size()) break;
    dir = parent_dir(dir);
  }
}

bool locate_v1(const SysPaths& p, const ProcCgroup& pc, CgroupCpu& cg) {
  for (const std::string& m :
       {*pc.v1_controllers, std::string("cpu,cpuacct"), std::string("cpu")}) {
    const std::string mount = p.cgroup + "/" + m;
    std::string dir = locate_under(mount, pc.v1_path, "cpu.cfs_period_us");
    if (dir.empty()) continue;
    cg.version = 1;
    cg.path = std::move(dir);
    apply_tightest_limit(cg, mount);
    return true;
  }
  return false;
}

bool locate_v2(const SysPaths& p, const ProcCgroup& pc, CgroupCpu& cg) {
  // cpu.stat exists in every v2 cgroup (cpu.max not at the root).
  for (const std::string& mount : {p.cgroup, p.cgroup + "/unified"}) {
    std::string dir = locate_under(mount, *pc.v2_path, "cpu.stat");
    if (dir.empty()) continue;
    cg.version = 2;
    cg.path = std::move(dir);
    apply_tightest_limit(cg, mount);
    return true;
  }
  return false;
}

}  // namespace

void parse_cgroup_cpu_stat(std::string_view text, int version, CgroupCpu& cg) {
  if (auto v = find_key_value(text, "nr_periods")) cg.nr_periods = *v;
  if (auto v = find_key_value(text, "nr_throttled")) cg.nr_throttled = *v;
  if (version == 1) {
    if (auto v = find_key_value(text, "throttled_time")) cg.throttled_ns = *v;
  } else if (auto v = find_key_value(text, "throttled_usec")) {
    cg.throttled_ns = *v * 1000;
  }
}

std::string cgroup_cpu_stat_file(const CgroupCpu& cg) {
  if (cg.version == 0) return {};
  return (cg.limit_path.empty() ? cg.path : cg.limit_path) + "/cpu.stat";
}

void refresh_cgroup_stat(CgroupCpu& cg) {
  try {
    std::string text;
    const std::string file = cgroup_cpu_stat_file(cg);
    if (!file.empty() && read_text_file(file, text)) parse_cgroup_cpu_stat(text, cg.version, cg);
  } catch (...) {  // allocation failure: keep the old counters
  }
}

CgroupCpu read_cgroup_cpu(const SysPaths& paths) {
  CgroupCpu cg;
  try {
    std::string text;
    if (!read_text_file(paths.proc + "/self/cgroup", text)) return cg;
    const ProcCgroup pc = parse_proc_cgroup(text);
    const bool found =
        (pc.v1_controllers && locate_v1(paths, pc, cg)) || (pc.v2_path && locate_v2(paths, pc, cg));
    if (found) refresh_cgroup_stat(cg);
  } catch (...) {  // allocation failure: no cgroup facts
    cg = CgroupCpu{};
  }
  return cg;
}

}  // namespace stallscope::sys
