// Regressions in a traced program's process tree. Each case failed on the
// build before its fix:
//  - a failed exec (ENOENT, EACCES, ENOEXEC, E2BIG) shut the recorder down for
//    good: the file said "complete", 0 drops, and held 10 of the 20 reads
//    (RELIABILITY.md 42);
//  - a relative STALLSCOPE_OUT, or the default ./stallscope-<host>-<pid>,
//    was exported as given: after a chdir a forked child wrote into a second
//    directory under the new working directory (43);
//  - a static or setuid program started by a traced program ran untraced
//    without a word, and the report analysed the parent as the whole story;
//    a top-level program with file capabilities left "no trace" with no
//    reason (45).
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cpu_premise.hpp"
#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace fs = std::filesystem;

namespace {

const std::string kTree = PROCESS_TREE;
const std::string kStatic = STATIC_BIN;
const std::string kCli = STALLSCOPE_CLI;

std::string make_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::multiset<uint64_t> sizes_of(const RunTrace& t, const std::string& path) {
  std::multiset<uint64_t> s;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead))
    if (e.name == path) s.insert(e.io.bytes);
  return s;
}

std::multiset<uint64_t> one_to(uint64_t n) {
  std::multiset<uint64_t> s;
  for (uint64_t i = 1; i <= n; ++i) s.insert(i);
  return s;
}

// The variables that would pick a run directory, removed: each case says
// which it sets.
const char* const kRunVars[] = {"STALLSCOPE_OUT", "STALLSCOPE_RUN_KEY", "STALLSCOPE_DIR",
                                "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE"};

// Runs argv under the shim in working directory `cwd`, stdout and stderr
// into `logs`/out.txt and `logs`/err.txt.
RunResult run_in(const std::string& cwd, const std::string& logs,
                 const std::vector<std::string>& argv,
                 std::map<std::string, std::string> env) {
  env.emplace("LD_PRELOAD", shim());
  return run_to_files(logs, argv, env, [&cwd] {
    for (const char* v : kRunVars) ::unsetenv(v);
    return ::chdir(cwd.c_str()) == 0;
  });
}

// The directories under `dir` (not below) whose name starts "stallscope-".
std::vector<std::string> run_dirs_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("stallscope-", 0) == 0)
      out.push_back(e.path().string());
  return out;
}

// Both processes of `chdirfork` in the one run directory: the parent's
// file, and the child's naming it as its parent; every read in them.
void check_one_run(const std::string& run, const std::string& data) {
  const RunTrace t = load_run(run);
  BOOST_TEST_REQUIRE(t.files.size() == 2u, run);
  const FileInfo& a = t.files[0];
  const FileInfo& b = t.files[1];
  BOOST_TEST((a.parent_pid == b.pid || b.parent_pid == a.pid));
  for (const FileInfo& fi : t.files) BOOST_TEST((fi.status == reader::Status::kComplete), fi.path);
  BOOST_TEST((sizes_of(t, data) == std::multiset<uint64_t>{31, 32, 33}));
}

std::string report_json(const std::string& run) {
  return stallscope::test::run({kCli, "report", "--json", run}, {}, false).out;
}

// Every warning of every rank of the report, and of the report itself.
std::string report_warnings(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  std::string all;
  if (j.is_discarded()) return "(no JSON report: " + text.substr(0, 200) + ")";
  for (const auto& w : j.value("warnings", nlohmann::json::array())) all += w.dump() + "\n";
  for (const auto& r : j.value("ranks", nlohmann::json::array()))
    for (const auto& w : r.value("warnings", nlohmann::json::array())) all += w.dump() + "\n";
  return all;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(process_tree)

BOOST_AUTO_TEST_CASE(a_failed_exec_keeps_the_process_traced) {
  TempDir dir;
  const std::string data = make_file(dir / "data", std::string(4096, 'x'));
  const std::string not_exec = make_file(dir / "not_exec", "#!/bin/sh\n", 0644);   // EACCES
  const std::string garbage = make_file(dir / "garbage", "\x01\x02garbage", 0755);  // ENOEXEC
  const RunResult r =
      run({kTree, "execfail", data, dir / "missing", not_exec, garbage, "big:/bin/true"},
          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "EXEC 2\nEXEC 13\nEXEC 8\nEXEC 7\n");  // ENOENT EACCES ENOEXEC E2BIG
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);  // the same file goes on: no image was replaced
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  // 10 reads before the first exec and 10 after each: all 50, once each.
  BOOST_TEST((sizes_of(t, data) == one_to(50)));
  // Nothing lost, and the file's summary says so.
  const reader::TraceReader file(t.files[0].path);
  uint64_t dropped = file.end().summary.disk_dropped;
  for (const auto& track : file.end().tracks) dropped += track.dropped_buffer + track.dropped_disk;
  BOOST_TEST(dropped == 0u);
}

BOOST_AUTO_TEST_CASE(a_failed_exec_then_a_successful_one_leaves_two_complete_files) {
  TempDir dir;
  const std::string data = make_file(dir / "data", std::string(4096, 'x'));
  // The second "exec" target is the program itself, reading 15 bytes.
  const std::string again = make_file(dir / "again.sh",
                                      "#!/bin/sh\nexec " + kTree + " chdirfork " + data + " /\n",
                                      0755);
  const RunResult r = run({kTree, "execfail", data, dir / "missing", again},
                          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  // process_tree (20 reads), then sh and process_tree again under the same
  // pid, and its forked child: every file complete.
  BOOST_TEST_REQUIRE(t.files.size() >= 3u);
  for (const FileInfo& fi : t.files) BOOST_TEST((fi.status == reader::Status::kComplete), fi.path);
  std::multiset<uint64_t> want = one_to(20);
  want.insert({31, 32, 33});
  BOOST_TEST((sizes_of(t, data) == want));
}

BOOST_AUTO_TEST_CASE(a_relative_run_directory_holds_the_whole_tree_after_chdir) {
  TempDir dir;
  const std::string data = make_file(dir / "data", std::string(4096, 'x'));
  fs::create_directories(dir / "work/outputs/2026-12-07");
  fs::create_directories(dir / "logs");
  const RunResult r = run_in(dir / "work", dir / "logs", {kTree, "chdirfork", data, "outputs/2026-12-07"},
                             {{"STALLSCOPE_OUT", "traces/run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(!fs::exists(dir / "work/outputs/2026-12-07/traces"));  // no second directory
  check_one_run(dir / "work/traces/run", data);
}

BOOST_AUTO_TEST_CASE(the_default_run_directory_holds_the_whole_tree_after_chdir) {
  TempDir dir;
  const std::string data = make_file(dir / "data", std::string(4096, 'x'));
  fs::create_directories(dir / "work/outputs");
  fs::create_directories(dir / "logs");
  const RunResult r = run_in(dir / "work", dir / "logs", {kTree, "chdirfork", data, "outputs"}, {});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(run_dirs_in(dir / "work/outputs").empty());
  const std::vector<std::string> runs = run_dirs_in(dir / "work");
  BOOST_TEST_REQUIRE(runs.size() == 1u);
  check_one_run(runs[0], data);
}

BOOST_AUTO_TEST_CASE(exec_of_a_static_program_is_named_on_stderr_and_in_the_report) {
  if (kStatic.empty()) skip_case("no static libc here: no static program to exec");
  TempDir dir;
  const std::string data = make_file(dir / "data", std::string(4096, 'x'));
  const RunResult r = run({kTree, "execfail", data, kStatic}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);  // the static program's own status
  const std::string said = "exec of " + kStatic + ": cannot be traced (statically linked";
  BOOST_TEST(r.err.find("stallscope: " + said) != std::string::npos, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);  // the static image has none
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  BOOST_TEST((sizes_of(t, data) == one_to(10)));
  const std::string warnings = report_warnings(report_json(dir / "run"));
  BOOST_TEST(warnings.find(said) != std::string::npos, warnings);
}

BOOST_AUTO_TEST_CASE(a_shell_running_a_static_program_says_so_in_the_report) {
  if (kStatic.empty()) skip_case("no static libc here: no static program to exec");
  TempDir dir;
  // sh starts the static program from a (v)fork child.
  const RunResult r = run({"/bin/sh", "-c", kStatic + "; exit $?"}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const std::string said = "exec of " + kStatic + ": cannot be traced (statically linked";
  BOOST_TEST(r.err.find(said) != std::string::npos, r.err);
  const std::string warnings = report_warnings(report_json(dir / "run"));
  BOOST_TEST(warnings.find(said) != std::string::npos, warnings);
}

// The vfork child only says it; its parent records the note (at exit here).
BOOST_AUTO_TEST_CASE(a_vfork_child_exec_of_a_static_program_is_named_by_its_parent) {
  if (kStatic.empty()) skip_case("no static libc here: no static program to exec");
  TempDir dir;
  const RunResult r = run({kTree, "vforkexec", kStatic}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "STATUS 0\n");
  const std::string said = "exec of " + kStatic + ": cannot be traced (statically linked";
  BOOST_TEST(r.err.find(said) != std::string::npos, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  const std::string warnings = report_warnings(report_json(dir / "run"));
  BOOST_TEST(warnings.find(said) != std::string::npos, warnings);
}

BOOST_AUTO_TEST_CASE(exec_of_a_setuid_program_of_another_user_is_named) {
  TempDir dir;
  const std::string data = make_file(dir / "data", std::string(4096, 'x'));
  const std::string prog = dir / "true-setuid";
  fs::copy_file("/bin/true", prog);
  BOOST_TEST_REQUIRE(::chown(prog.c_str(), 65534, 65534) == 0);
  BOOST_TEST_REQUIRE(::chmod(prog.c_str(), 04755) == 0);
  const RunResult r = run({kTree, "execfail", data, prog}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("exec of " + prog + ": cannot be traced (setuid") != std::string::npos,
             r.err);
  // Not a word about a program the shim does reach.
  const RunResult plain = run({kTree, "execfail", data, "/bin/true"}, {{"STALLSCOPE_OUT", dir / "run2"}});
  BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.err);
  BOOST_TEST(plain.err.find("cannot be traced") == std::string::npos, plain.err);
}

// A ctest entry of its own (stallscope_add_case_tests): it may skip.
BOOST_AUTO_TEST_CASE(a_program_with_file_capabilities_is_refused_by_name,
                     *boost::unit_test::disabled()) {
  if (::access("/usr/sbin/setcap", X_OK) != 0 && ::access("/sbin/setcap", X_OK) != 0)
    skip_case("no setcap (libcap2-bin) here");
  if (::access("/usr/bin/setpriv", X_OK) != 0) skip_case("no setpriv (util-linux) here");
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);  // the other user reads the copy
  const std::string prog = dir / "true-caps";
  fs::copy_file("/bin/true", prog);
  const RunResult set = run({"/bin/sh", "-c", "PATH=/usr/sbin:/sbin:$PATH setcap cap_net_raw+ep " + prog},
                            {}, false);
  if (set.exit_code != 0) skip_case("this file system refuses security.capability: " + set.err);
  fs::create_directories(dir / "out");
  ::chmod((dir / "out").c_str(), 0777);
  const std::vector<std::string> as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                              "--clear-groups"};
  // Top level: `stallscope run` refuses it, naming the reason.
  std::vector<std::string> argv = as_nobody;
  argv.insert(argv.end(), {kCli, "run", "--out", dir / "out/a", "--", prog});
  const RunResult top = run(argv, {}, false);
  BOOST_TEST(top.exit_code == 2, top.err);
  BOOST_TEST(top.err.find(prog + " has file capabilities") != std::string::npos, top.err);
  // Root gains nothing from the capabilities: the loader keeps LD_PRELOAD.
  const RunResult root = run({kCli, "run", "--out", dir / "out/b", "--", prog}, {}, false);
  BOOST_TEST(root.exit_code == 0, root.err);
  BOOST_TEST(root.err.find("file capabilities") == std::string::npos, root.err);
  BOOST_TEST(load_run(dir / "out/b").files.size() == 1u);  // and it was traced
  // Started by a traced program of that user: named on stderr.
  const std::string data = make_file(dir / "data", std::string(64, 'x'));
  argv = as_nobody;
  argv.insert(argv.end(), {"/usr/bin/env", "LD_PRELOAD=" + shim(), "STALLSCOPE_OUT=" + (dir / "out/c"),
                           kTree, "execfail", data, prog});
  const RunResult child = run(argv, {}, false);
  BOOST_TEST(child.exit_code == 0, child.err);
  BOOST_TEST(child.err.find("exec of " + prog + ": cannot be traced (file capabilities") !=
                 std::string::npos,
             child.err);
}

BOOST_AUTO_TEST_SUITE_END()
