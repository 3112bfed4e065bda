// Descriptor and process life cycles under the shim (RELIABILITY.md 5,
// 9-14): fd reuse never keeps a stale path, fork/vfork/posix_spawn/exec
// and _exit keep every process's file sound, a pipe fed by an exec'd
// program is no data wait, 64 threads' first calls make one start.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <set>
#include <string>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

std::string make_file(const TempDir& dir, const std::string& name, size_t bytes = 4096) {
  const std::string path = dir / name;
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  const std::string data(bytes, 'x');
  BOOST_REQUIRE(fd >= 0 && ::write(fd, data.data(), data.size()) == ssize_t(data.size()));
  ::close(fd);
  return path;
}

std::multiset<uint64_t> sizes_of(const RunTrace& t, const std::string& path) {
  std::multiset<uint64_t> s;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) if (e.name == path) s.insert(e.io.bytes);
  return s;
}

RunResult lifecycle(const TempDir& dir, std::vector<std::string> args,
                    std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), helper("lifecycle"));
  env.emplace("STALLSCOPE_OUT", dir / "run");
  return run(args, env);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_process)

BOOST_AUTO_TEST_CASE(reused_descriptor_never_keeps_a_stale_path) {
  TempDir dir;
  const std::string a = make_file(dir, "a"), b = make_file(dir, "b");
  // No sampler: its listing opens files of its own now and then, and one
  // could take the number the program expects back.
  const RunResult r = lifecycle(dir, {"reuse", a, b}, {{"STALLSCOPE_SAMPLE_MS", "0"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("SAME1") == 1);  // the cases really reuse the number
  BOOST_TEST(r.value("SAME3") == 1);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST((sizes_of(t, a) == std::multiset<uint64_t>{101, 102}));
  BOOST_TEST((sizes_of(t, b) == std::multiset<uint64_t>{201, 202, 203}));
}

BOOST_AUTO_TEST_CASE(vfork_and_posix_spawn_under_threads) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  const RunResult r = lifecycle(dir, {"spawn", f});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  uint32_t parent = 0;
  for (const FileInfo& fi : t.files) {
    BOOST_TEST((fi.status == reader::Status::kComplete), fi.path);
    if (fi.comm == "lifecycle") parent = fi.pid;
  }
  BOOST_TEST_REQUIRE(parent != 0u);
  // Every read the threads counted is in the parent's file, none elsewhere.
  uint64_t reads = 0, elsewhere = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    if (e.name == f) (e.pid == parent ? reads : elsewhere) += 1;
  }
  BOOST_TEST(reads == uint64_t(r.value("READS")));
  BOOST_TEST(elsewhere == 0u);
  // The spawned /bin/true children were followed (their own files).
  size_t children = 0;
  for (const FileInfo& fi : t.files) children += fi.parent_pid == parent;
  BOOST_TEST(children >= 20u);
}

BOOST_AUTO_TEST_CASE(exec_completes_the_file_first_and_follows_the_child) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  const RunResult r = lifecycle(dir, {"exec", f, helper("lifecycle"), "read", f, "300"});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 2u);  // the image before exec, and after
  for (const FileInfo& fi : t.files) BOOST_TEST((fi.status == reader::Status::kComplete));
  BOOST_TEST(t.files[0].pid == t.files[1].pid);
  BOOST_TEST((sizes_of(t, f) == std::multiset<uint64_t>{100, 300}));
}

BOOST_AUTO_TEST_CASE(follow_none_leaves_children_untraced_and_scrubbed) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  const std::string out = dir / "env";
  const RunResult r = lifecycle(dir, {"exec", f, "/bin/sh", "-c", "env > " + out},
                                {{"STALLSCOPE_FOLLOW", "none"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST(t.files.size() == 1u);
  RunResult env = run({"/bin/cat", out}, {}, false);
  BOOST_TEST(env.out.find("libstallscope_preload") == std::string::npos, env.out);
  BOOST_TEST(env.out.find("NVTX_INJECTION64_PATH") == std::string::npos);
  BOOST_TEST(env.out.find("CUDA_INJECTION64_PATH") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(excluded_tools_are_not_traced) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  // `uname` is a system tool: no file of its own, nothing injected below it.
  const RunResult r = lifecycle(dir, {"exec", f, "/bin/uname"});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(load_run(dir / "run").files.size() == 1u);
}

BOOST_AUTO_TEST_CASE(closing_every_descriptor_keeps_tracing_sound) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  const RunResult r = lifecycle(dir, {"closeall", f});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("CLOSED") != std::string::npos);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST(sizes_of(t, f).count(111) == 1u);
  // The data file was never written by the recorder.
  BOOST_TEST(std::filesystem::file_size(f) == 4096u);
}

BOOST_AUTO_TEST_CASE(underscore_exit_completes_the_file) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  const RunResult r = lifecycle(dir, {"exit", f});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  BOOST_TEST(sizes_of(t, f).count(113) == 1u);
}

BOOST_AUTO_TEST_CASE(sigkilled_worker_leaves_a_readable_file) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  const RunResult r = lifecycle(dir, {"killworker", f}, {{"STALLSCOPE_FLUSH_MS", "50"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("KILLED") == 1);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 2u);
  for (const FileInfo& fi : t.files) {
    if (fi.parent_pid == t.files[0].pid || fi.parent_pid == t.files[1].pid) {
      BOOST_TEST((fi.status == reader::Status::kTruncated));  // the worker: cut, not broken
    } else {
      BOOST_TEST((fi.status == reader::Status::kComplete));
    }
  }
  // Its first 100 reads came 200 ms (four 50 ms flushes) before the kill.
  BOOST_TEST(sizes_of(t, f).count(99) >= 50u);
  BOOST_TEST(sizes_of(t, f).count(98) == 1u);
}

BOOST_AUTO_TEST_CASE(pipe_fed_by_an_exec_program_is_no_data_wait) {
  TempDir dir;
  const RunResult r = lifecycle(dir, {"execpipe"});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("PIPE") == 6);
  BOOST_TEST(load_run(dir / "run").of_kind(format::Kind::kDataWait).empty());
}

BOOST_AUTO_TEST_CASE(sixty_four_threads_first_calls_at_once) {
  TempDir dir;
  const std::string f = make_file(dir, "f");
  // Small thread buffers: all 64 fit the recorder's memory budget.
  const RunResult r = lifecycle(dir, {"threads", f, "64"}, {{"STALLSCOPE_THREAD_BUFFER_KB", "64"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  std::set<uint32_t> tids;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    if (e.name == f && e.io.bytes == 77) tids.insert(e.tid);
  }
  BOOST_TEST(tids.size() == 64u);  // one read per thread, none lost
}

BOOST_AUTO_TEST_SUITE_END()
