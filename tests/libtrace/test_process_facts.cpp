// Process facts: fake /proc and cgroup trees (v1, v2, hybrid, containers,
// limited and unlimited, malformed) and one look at the real machine.
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "stallscope/internal/proc_text.hpp"
#include "stallscope/internal/process_facts.hpp"

namespace fs = std::filesystem;
using namespace stallscope::sys;

namespace {

// A fake root with proc/, cgroup/ and cpu/ under a temp directory.
struct FakeTree {
  fs::path root;
  SysPaths paths;
  FakeTree() {
    char tmpl[] = "/tmp/stallscope-facts-XXXXXX";
    root = ::mkdtemp(tmpl);
    paths.proc = (root / "proc").string();
    paths.cgroup = (root / "cgroup").string();
    paths.sys_cpu = (root / "cpu").string();
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(process_facts)

BOOST_AUTO_TEST_CASE(cgroup_v1_cpu_cpuacct_limited_with_throttling) {
  FakeTree t;
  t.write("proc/self/cgroup", "12:memory:/x\n3:cpu,cpuacct:/slurm/job_1\n2:cpuset:/\n");
  t.write("cgroup/cpu,cpuacct/slurm/job_1/cpu.cfs_quota_us", "150000\n");
  t.write("cgroup/cpu,cpuacct/slurm/job_1/cpu.cfs_period_us", "100000\n");
  t.write("cgroup/cpu,cpuacct/slurm/job_1/cpu.stat",
          "nr_periods 40\nnr_throttled 7\nthrottled_time 123456789\nnr_bursts 0\n");
  const CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 1);
  BOOST_TEST(cg.path == t.paths.cgroup + "/cpu,cpuacct/slurm/job_1");
  BOOST_TEST(cg.quota_us == 150000);
  BOOST_TEST(cg.period_us == 100000);
  BOOST_TEST(cg.quota_cores() == 1.5);
  BOOST_TEST(cg.nr_periods == 40);
  BOOST_TEST(cg.nr_throttled == 7);
  BOOST_TEST(cg.throttled_ns == 123456789);
}

BOOST_AUTO_TEST_CASE(cgroup_v1_cpu_mount_unlimited) {
  FakeTree t;
  t.write("proc/self/cgroup", "4:cpuacct:/a\n1:cpu:/a\n0::/\n");  // hybrid: v1 cpu wins
  t.write("cgroup/cpu/a/cpu.cfs_quota_us", "-1\n");
  t.write("cgroup/cpu/a/cpu.cfs_period_us", "100000\n");
  t.write("cgroup/cpu/a/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n");
  t.write("cgroup/cpu.stat", "usage_usec 1\n");  // a v2 root too: must not be chosen
  const CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 1);
  BOOST_TEST(cg.path == t.paths.cgroup + "/cpu/a");
  BOOST_TEST(cg.quota_us == -1);
  BOOST_TEST(cg.period_us == 100000);
  BOOST_TEST(cg.quota_cores() == -1.0);
}

BOOST_AUTO_TEST_CASE(cgroup_v1_in_a_container_falls_back_to_the_mount_root) {
  FakeTree t;
  // The host's path is listed, but the container sees its own cgroup at the root.
  t.write("proc/self/cgroup", "5:cpu,cpuacct:/docker/0123abcd\n");
  t.write("cgroup/cpu/cpu.cfs_quota_us", "50000\n");
  t.write("cgroup/cpu/cpu.cfs_period_us", "100000\n");
  t.write("cgroup/cpu/cpu.stat", "nr_periods 9\nnr_throttled 3\nthrottled_time 5000\n");
  const CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 1);
  BOOST_TEST(cg.path == t.paths.cgroup + "/cpu");
  BOOST_TEST(cg.quota_cores() == 0.5);
  BOOST_TEST(cg.nr_throttled == 3);
}

BOOST_AUTO_TEST_CASE(cgroup_v2_limited_and_unlimited) {
  FakeTree t;
  t.write("proc/self/cgroup", "0::/user.slice/job\n");
  t.write("cgroup/user.slice/job/cpu.max", "200000 100000\n");
  t.write("cgroup/user.slice/job/cpu.stat",
          "usage_usec 99\nnr_periods 12\nnr_throttled 4\nthrottled_usec 2500\n");
  CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 2);
  BOOST_TEST(cg.path == t.paths.cgroup + "/user.slice/job");
  BOOST_TEST(cg.quota_cores() == 2.0);
  BOOST_TEST(cg.nr_periods == 12);
  BOOST_TEST(cg.nr_throttled == 4);
  BOOST_TEST(cg.throttled_ns == 2500000);
  t.write("cgroup/user.slice/job/cpu.max", "max 100000\n");
  cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 2);
  BOOST_TEST(cg.quota_us == -1);
  BOOST_TEST(cg.period_us == 100000);
}

BOOST_AUTO_TEST_CASE(cgroup_v2_limit_on_an_ancestor_binds) {
  FakeTree t;
  t.write("proc/self/cgroup", "0::/pod/ctr\n");
  t.write("cgroup/cpu.stat", "usage_usec 1\n");
  t.write("cgroup/pod/cpu.max", "50000 100000\n");
  t.write("cgroup/pod/cpu.stat", "nr_periods 8\nnr_throttled 6\nthrottled_usec 7\n");
  t.write("cgroup/pod/ctr/cpu.max", "max 100000\n");
  t.write("cgroup/pod/ctr/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
  const CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.path == t.paths.cgroup + "/pod/ctr");
  BOOST_TEST(cg.limit_path == t.paths.cgroup + "/pod");
  BOOST_TEST(cg.quota_cores() == 0.5);
  BOOST_TEST(cg.nr_throttled == 6);  // counted where the limit is
  BOOST_TEST(cgroup_cpu_stat_file(cg) == t.paths.cgroup + "/pod/cpu.stat");
}

BOOST_AUTO_TEST_CASE(cgroup_v2_namespace_path_outside_uses_the_root) {
  FakeTree t;
  t.write("proc/self/cgroup", "0::/../../escape\n");
  t.write("cgroup/cpu.max", "300000 100000\n");  // a container's own root
  t.write("cgroup/cpu.stat", "nr_periods 1\n");
  fs::create_directories(t.root / "escape");
  const CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 2);
  BOOST_TEST(cg.path == t.paths.cgroup);
  BOOST_TEST(cg.quota_cores() == 3.0);
}

BOOST_AUTO_TEST_CASE(malformed_or_missing_cgroup_files_leave_defaults) {
  FakeTree t;
  BOOST_TEST(read_cgroup_cpu(t.paths).version == 0);  // no /proc/self/cgroup at all
  t.write("proc/self/cgroup", "garbage\n\n::\n7\n");
  BOOST_TEST(read_cgroup_cpu(t.paths).version == 0);
  t.write("proc/self/cgroup", "1:cpu:/a\n");
  BOOST_TEST(read_cgroup_cpu(t.paths).version == 0);  // controller listed, nothing mounted
  t.write("cgroup/cpu/a/cpu.cfs_period_us", "abc\n");
  t.write("cgroup/cpu/a/cpu.cfs_quota_us", "99999999999999999999999\n");
  t.write("cgroup/cpu/a/cpu.stat", "nr_periods x\nnr_throttled\nthrottled_time -\n");
  CgroupCpu cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 1);
  BOOST_TEST(cg.quota_us == -1);
  BOOST_TEST(cg.period_us == 0);
  BOOST_TEST(cg.nr_periods == 0);
  BOOST_TEST(cg.quota_cores() == -1.0);
  t.write("proc/self/cgroup", "0::/b\n");
  t.write("cgroup/b/cpu.stat", "");
  t.write("cgroup/b/cpu.max", "200000\n");  // no period
  cg = read_cgroup_cpu(t.paths);
  BOOST_TEST(cg.version == 2);
  BOOST_TEST(cg.quota_cores() == -1.0);
  t.write("cgroup/b/cpu.max", "0 100000\n");
  BOOST_TEST(read_cgroup_cpu(t.paths).quota_us == -1);
}

BOOST_AUTO_TEST_CASE(refresh_rereads_only_the_counters) {
  FakeTree t;
  t.write("proc/self/cgroup", "0::/j\n");
  t.write("cgroup/j/cpu.max", "100000 100000\n");
  t.write("cgroup/j/cpu.stat", "nr_periods 1\nnr_throttled 1\nthrottled_usec 1\n");
  CgroupCpu cg = read_cgroup_cpu(t.paths);
  t.write("cgroup/j/cpu.stat", "nr_periods 10\nnr_throttled 5\nthrottled_usec 40\n");
  t.write("cgroup/j/cpu.max", "max 100000\n");
  refresh_cgroup_stat(cg);
  BOOST_TEST(cg.nr_periods == 10);
  BOOST_TEST(cg.nr_throttled == 5);
  BOOST_TEST(cg.throttled_ns == 40000);
  BOOST_TEST(cg.quota_cores() == 1.0);
  fs::remove(t.root / "cgroup/j/cpu.stat");
  refresh_cgroup_stat(cg);  // vanished: counters kept
  BOOST_TEST(cg.nr_throttled == 5);
}

BOOST_AUTO_TEST_CASE(fake_proc_identity_fields) {
  FakeTree t;
  // comm with spaces and parentheses: fields are counted after the LAST ')'.
  std::string stat =
      "4242 (we(ird) x) S 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 987654 23\n";
  t.write("proc/self/stat", stat);
  t.write("proc/self/comm", "we(ird) x\n");
  t.write("proc/self/cmdline", std::string("python3\0-u\0train.py\0--lr=0.1\0", 29));
  t.write("proc/sys/kernel/random/boot_id", "feb1c3ea-755c-4a63-9b51-d276b7214fff\n");
  t.write("cpu/online", "0-3,8-11\n");
  fs::create_directories(t.root / "proc/self");
  fs::create_symlink("/usr/bin/python3.11", t.root / "proc/self/exe");
  const ProcessFacts f = collect_process_facts(t.paths);
  BOOST_TEST(f.start_time_ticks == 987654u);
  BOOST_TEST(f.comm == "we(ird) x");
  BOOST_TEST(f.cmdline.size() == 4u);
  BOOST_TEST(f.cmdline[3] == "--lr=0.1");
  BOOST_TEST(f.exe == "/usr/bin/python3.11");
  BOOST_TEST(f.boot_id == "feb1c3ea-755c-4a63-9b51-d276b7214fff");
  BOOST_TEST(f.online_cpus == 8);
  BOOST_TEST(f.pid == ::getpid());  // from the kernel, not the fake tree
}

BOOST_AUTO_TEST_CASE(an_empty_tree_gives_defaults_not_errors) {
  FakeTree t;
  t.write("proc/self/stat", "1 (x) S\n");  // truncated
  t.write("cpu/online", "garbage");        // falls back to sysconf
  const ProcessFacts f = collect_process_facts(t.paths);
  BOOST_TEST(f.start_time_ticks == 0u);
  BOOST_TEST(f.comm.empty());
  BOOST_TEST(f.cmdline.empty());
  BOOST_TEST(f.exe.empty());
  BOOST_TEST(f.boot_id.empty());
  BOOST_TEST(f.cgroup.version == 0);
  BOOST_TEST(f.online_cpus == static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  BOOST_TEST(!f.affinity.empty());  // sched_getaffinity, not the tree
}

BOOST_AUTO_TEST_CASE(usable_cpus_is_the_smaller_of_affinity_and_quota) {
  ProcessFacts f;
  f.affinity = {0, 1, 2, 3};
  BOOST_TEST(f.usable_cpus() == 4.0);
  f.cgroup.quota_us = 250000;
  f.cgroup.period_us = 100000;
  BOOST_TEST(f.usable_cpus() == 2.5);
  f.cgroup.quota_us = 800000;
  BOOST_TEST(f.usable_cpus() == 4.0);
  f.affinity.clear();
  f.online_cpus = 0;
  f.cgroup.quota_us = -1;
  BOOST_TEST(f.usable_cpus() == 1.0);
}

BOOST_AUTO_TEST_CASE(to_json_is_flat_and_dumps_any_bytes) {
  ProcessFacts f;
  f.pid = 12;
  f.comm = "bad\xff\xfe";
  f.cmdline = {"python3", std::string("\xc0\x80", 2), "ok"};
  f.host = "h\xed\xa0\x80";  // an encoded surrogate: invalid UTF-8 too
  f.affinity = {0, 1, 2, 3, 8};
  f.cgroup.version = 2;
  f.cgroup.quota_us = 150000;
  f.cgroup.period_us = 100000;
  const nlohmann::json j = to_json(f);
  std::string text;
  BOOST_CHECK_NO_THROW(text = j.dump());
  for (const auto& [key, value] : j.items()) {
    BOOST_TEST((!value.is_object()), key);
  }
  BOOST_TEST(j["pid"] == 12);
  BOOST_TEST(j["affinity"] == "0-3,8");
  BOOST_TEST(j["affinity_count"] == 5);
  BOOST_TEST(j["cgroup_quota_cores"] == 1.5);
  BOOST_TEST(j["usable_cpus"] == 1.5);
  BOOST_TEST(j["cmdline"].size() == 3u);
  BOOST_TEST(j["cmdline"][2] == "ok");
  for (const char* key :
       {"ppid", "host", "comm", "exe", "boot_id", "start_time_ticks", "clk_tck", "online_cpus",
        "cgroup_version", "cgroup_path", "cgroup_limit_path", "cgroup_quota_us", "cgroup_period_us",
        "cgroup_nr_periods", "cgroup_nr_throttled", "cgroup_throttled_ns"}) {
    BOOST_TEST(j.contains(key), key);
  }
}

BOOST_AUTO_TEST_CASE(parsers_reject_what_they_do_not_understand) {
  BOOST_TEST(parse_cpu_list("0-1").size() == 2u);
  BOOST_TEST(parse_cpu_list("3,1,2-2\n") == (std::vector<int>{1, 2, 3}));
  BOOST_TEST(parse_cpu_list("3-1").empty());
  BOOST_TEST(parse_cpu_list("0-99999999").empty());
  BOOST_TEST(parse_cpu_list("a").empty());
  BOOST_TEST(format_cpu_list({}) == "");
  BOOST_TEST(format_cpu_list({0, 2, 3, 4, 7}) == "0,2-4,7");
  BOOST_TEST(parse_int64("-9223372036854775808").value() == INT64_MIN);
  BOOST_TEST(!parse_int64("9223372036854775808"));
  BOOST_TEST(!parse_int64("1 "));
  BOOST_TEST(!parse_uint64("-1"));
  BOOST_TEST(stat_field("1 (a) b) S 7 8", 3) == "S");
  BOOST_TEST(stat_field("1 (a) b) S 7 8", 5) == "8");
  BOOST_TEST(stat_field("1 (a) b) S 7 8", 6).empty());
  BOOST_TEST(stat_field("no paren", 3).empty());
}

// The real machine: plausible values, whatever it is.
BOOST_AUTO_TEST_CASE(real_machine_values_are_plausible) {
  const ProcessFacts f = collect_process_facts();
  BOOST_TEST(f.pid == ::getpid());
  BOOST_TEST(f.parent_pid == ::getppid());
  BOOST_TEST(!f.host.empty());
  BOOST_TEST(f.comm == std::string("test_process_facts").substr(0, 15));
  BOOST_TEST(!f.cmdline.empty());
  BOOST_TEST(fs::path(f.cmdline[0]).filename() == "test_process_facts");
  BOOST_TEST(fs::equivalent(f.exe, "/proc/self/exe"));
  BOOST_TEST(!f.affinity.empty());
  BOOST_TEST(f.online_cpus >= static_cast<int>(f.affinity.size()));
  BOOST_TEST(f.affinity.back() < CPU_SETSIZE * 64);
  BOOST_TEST(f.start_time_ticks > 0u);
  BOOST_TEST(f.boot_id.size() == 36u);
  BOOST_TEST(f.usable_cpus() > 0.0);
  BOOST_TEST(f.usable_cpus() <= static_cast<double>(f.affinity.size()));
  BOOST_TEST((f.cgroup.version >= 0 && f.cgroup.version <= 2));
  if (f.cgroup.version != 0) BOOST_TEST(fs::is_directory(f.cgroup.path));
  BOOST_TEST_MESSAGE("facts: " << to_json(f).dump());
}

BOOST_AUTO_TEST_SUITE_END()
