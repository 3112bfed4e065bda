// Regressions (issue 46): a traced program that meets its own limits must
// never die or lose its own resources because of stallscope.
//   RELIABILITY.md 39: memory exhausted by the program; the recorder's
//     threads take no malloc arena and little address space of their own.
//   RELIABILITY.md 40: a process/thread limit (RLIMIT_NPROC) near which the
//     program forks; no thread at all (clone3 refused with EAGAIN).
//   A raw clone thread sharing its creator's TLS: its events are dropped
//     and counted, never written into the creator's ring.
// Each case failed on the build before the fix: terminate() on bad_alloc or
// "failed to register TLS destructor", two extra 64 MiB arenas and two
// 8 MiB stacks, fork() failing with EAGAIN or terminate() on
// std::system_error, events lost with a drop count of 0.
// STALLSCOPE_TEST_SHIM runs the cases against another build's shim.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "skip_visibly.hpp"
#include "preload/preload_run.hpp"
#include "stallscope/file_summary.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

std::string guest() { return build_dir() + "/tests/repro/guest_limits"; }

std::string shim_under_test() {
  const char* other = std::getenv("STALLSCOPE_TEST_SHIM");
  return other != nullptr && *other != '\0' ? other : shim();
}

std::string make_data(const TempDir& dir) {
  const std::string path = dir / "data";
  std::ofstream(path) << std::string(4096, 'x');
  ::chmod(path.c_str(), 0644);
  return path;
}

size_t count_notes(const std::string& err) {
  size_t n = 0;
  for (size_t at = 0; (at = err.find("stallscope:", at)) != std::string::npos; ++at) ++n;
  return n;
}

// Runs `argv` behind `prefix` (prlimit, setpriv: never traced themselves),
// traced or not: the shim is set by env(1) right before the program.
RunResult run_guest(const TempDir& dir, const std::vector<std::string>& prefix,
                    const std::vector<std::string>& args, bool traced,
                    const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = prefix;
  argv.push_back("/usr/bin/env");
  argv.push_back("STALLSCOPE_OUT=" + (dir / "run"));
  argv.insert(argv.end(), env.begin(), env.end());
  if (traced) argv.push_back("LD_PRELOAD=" + shim_under_test());
  argv.push_back(guest());
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {}, /*preload=*/false, /*timeout_s=*/60);
}

// Runs the guest (traced) with clone3 refused with EAGAIN, as a thread
// limit refuses it, by a seccomp filter installed before the exec: no
// thread can start (glibc's pthread_create uses clone3), fork() can (clone).
RunResult run_with_threads_refused(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {guest()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_to_files(dir.path(), argv,
                      {{"STALLSCOPE_OUT", dir / "run"}, {"LD_PRELOAD", shim_under_test()}},
                      [] { return refuse_syscall(__NR_clone3, EAGAIN); });
}

boost::test_tools::assertion_result can_switch_user(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(::access("/usr/bin/setpriv", X_OK) == 0 &&
                                        ::access("/usr/bin/prlimit", X_OK) == 0 &&
                                        ::geteuid() == 0);
  r.message() << "needs root, setpriv and prlimit: RLIMIT_NPROC binds only another user";
  return r;
}

boost::test_tools::assertion_result has_prlimit(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(::access("/usr/bin/prlimit", X_OK) == 0);
  r.message() << "needs prlimit";
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repro_guest_limits)

// Calibrated against the same program untraced, in the same test: the
// recorder's flusher and sampler must not get malloc arenas of their own
// (64 MiB of address space each) nor 8 MiB default stacks.
BOOST_AUTO_TEST_CASE(idle_traced_program_keeps_its_arenas_and_address_space) {
  TempDir dir;
  ::mkdir((dir / "run").c_str(), 0755);
  const RunResult plain = run_guest(dir, {}, {"idle", "300"}, false);
  const RunResult traced = run_guest(dir, {}, {"idle", "300"}, true);
  BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.err);
  BOOST_TEST_REQUIRE(traced.exit_code == 0, traced.err);
  BOOST_TEST_MESSAGE("untraced: " << plain.value("heaps") << " heaps, " << plain.value("vmsize")
                                  << " KiB; traced: " << traced.value("heaps") << " heaps, "
                                  << traced.value("vmsize") << " KiB");
  BOOST_TEST(plain.value("heaps") >= 1);
  BOOST_TEST(traced.value("heaps") == plain.value("heaps"));
  const long long growth_kib = traced.value("vmsize") - plain.value("vmsize");
  BOOST_TEST(growth_kib < 40 * 1024, "the shim adds " << growth_kib << " KiB of address space");
  // As `stallscope run` traces it: the flusher also publishes step progress.
  const RunResult run = run_guest(dir, {}, {"idle", "300"}, true, {"STALLSCOPE_PROGRESS=on"});
  BOOST_TEST_REQUIRE(run.exit_code == 0, run.err);
  BOOST_TEST(run.value("heaps") == plain.value("heaps"));
  // It was traced: the trace exists.
  BOOST_TEST(!load_run(dir / "run").files.empty());
}

// The program exhausts its address space (ulimit -v), frees a little, then
// reads in a thread started before: it goes on with its own output intact, and the
// recorder says at most once that tracing is off.
BOOST_AUTO_TEST_CASE(program_out_of_memory_goes_on_with_one_note,
                     *stallscope::test::skip_unless(has_prlimit)) {
  TempDir dir;
  ::mkdir((dir / "run").c_str(), 0755);
  const std::string data = make_data(dir);
  const std::vector<std::string> limit = {"/usr/bin/prlimit", "--as=300000000"};
  for (const char* freed_kib : {"0", "2", "8", "64"}) {
    BOOST_TEST_CONTEXT("after freeing " << freed_kib << " KiB") {
      const RunResult plain = run_guest(dir, limit, {"oom", data, freed_kib}, false);
      BOOST_TEST_REQUIRE(plain.exit_code == 0, "untraced: " << plain.out << plain.err);
      const RunResult r = run_guest(dir, limit, {"oom", data, freed_kib}, true);
      BOOST_TEST(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                           << ": " << r.out << r.err);
      BOOST_TEST(r.out.find("reads 100 ok\n") != std::string::npos, r.out);
      BOOST_TEST(count_notes(r.err) <= 1u, r.err);
      BOOST_TEST(r.err.find("terminate") == std::string::npos, r.err);
      BOOST_TEST(r.err.find("Fatal glibc error") == std::string::npos, r.err);
    }
  }
}

// RLIMIT_NPROC of a user of its own (root ignores it): the program's fork
// succeeds traced wherever it does untraced, and the recorder names the
// limit once.
BOOST_AUTO_TEST_CASE(process_limit_leaves_the_program_its_fork,
                     *stallscope::test::skip_unless(can_switch_user)) {
  TempDir dir;
  ::mkdir((dir / "run").c_str(), 0777);
  ::chmod((dir / "run").c_str(), 0777);
  ::chmod(dir.path().c_str(), 0777);  // an unlucky run-2 can be made
  const std::string data = make_data(dir);
  // A uid no other test uses, so that its task count is this test's.
  const std::string uid = std::to_string(47000 + ::getpid() % 10000);
  for (const char* nproc : {"3", "4"}) {
    BOOST_TEST_CONTEXT("RLIMIT_NPROC " << nproc) {
      const std::vector<std::string> limit = {
          "/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups",
          "/usr/bin/prlimit", std::string("--nproc=") + nproc};
      const RunResult plain = run_guest(dir, limit, {"fork", data}, false);
      BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.out << plain.err);
      BOOST_TEST_REQUIRE(plain.out == "fork ok\n", "untraced: " << plain.out);
      const RunResult r = run_guest(dir, limit, {"fork", data}, true);
      BOOST_TEST(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                           << ": " << r.err);
      BOOST_TEST(r.out == "fork ok\n", r.out << r.err);
      BOOST_TEST(count_notes(r.err) == 1u, r.err);
      BOOST_TEST(r.err.find("RLIMIT_NPROC") != std::string::npos, r.err);
    }
  }
}

// No thread can start (clone3 refused with EAGAIN, as a thread limit
// refuses it): the flusher's failed start turns tracing off with one note
// naming the limit; the program, which only forks, goes on untouched.
BOOST_AUTO_TEST_CASE(flusher_that_cannot_start_turns_tracing_off_with_one_note) {
  TempDir dir;
  ::mkdir((dir / "run").c_str(), 0755);
  const std::string data = make_data(dir);
  const RunResult r = run_with_threads_refused(dir, {"fork", data});
  BOOST_TEST_REQUIRE(r.exit_code != 125, "seccomp unavailable: " << r.err);
  BOOST_TEST(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal << ": "
                                       << r.err);
  BOOST_TEST(r.out == "fork ok\n", r.out << r.err);
  BOOST_TEST(count_notes(r.err) == 1u, r.err);
  BOOST_TEST(r.err.find("cannot start its flusher thread") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("RLIMIT_NPROC") != std::string::npos, r.err);
}

// A thread made by a raw clone without CLONE_SETTLS reads while its
// creator reads: the creator's events all arrive on its own track, and
// each of the clone's is counted as a drop, none written.
BOOST_AUTO_TEST_CASE(raw_clone_thread_sharing_tls_is_counted_as_drops) {
  TempDir dir;
  ::mkdir((dir / "run").c_str(), 0755);
  const std::string data = make_data(dir);
  constexpr int kReads = 2000;
  const RunResult r = run_guest(dir, {}, {"clone", data, std::to_string(kReads)}, true);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                               << ": " << r.err);
  BOOST_TEST(r.out == "reads main 2000 clone 2000\n", r.out);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  const uint32_t pid = t.files[0].pid;
  size_t main_reads = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    BOOST_TEST(e.tid == pid, "a read on thread " << e.tid << " " << e.thread);
    if (e.name == data) ++main_reads;
  }
  BOOST_TEST(main_reads == size_t{kReads} + 1);  // and the first one, before the clone
  const reader::FileSummary s = reader::summarize_file(t.files[0].path);
  BOOST_TEST(s.buffer_dropped() == uint64_t{kReads});
}

// A thread whose first events come from a fiber's stack (oneTBB's resumable
// tasks in the loader's pool did this) is its own pthread: it registers and
// every event is kept; none is taken for a clone sharing its thread-locals.
BOOST_AUTO_TEST_CASE(thread_starting_on_a_fiber_stack_keeps_every_event) {
  TempDir dir;
  ::mkdir((dir / "run").c_str(), 0755);
  const std::string data = make_data(dir);
  constexpr int kReads = 500;
  const RunResult r = run_guest(dir, {}, {"fiber", data, std::to_string(kReads)}, true);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                               << ": " << r.err);
  BOOST_TEST(r.out == "reads fiber 500 thread 500\n", r.out);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  const uint32_t pid = t.files[0].pid;
  size_t thread_reads = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead))
    if (e.name == data && e.tid != pid) ++thread_reads;
  BOOST_TEST(thread_reads == size_t{2 * kReads});
  const reader::FileSummary s = reader::summarize_file(t.files[0].path);
  BOOST_TEST(s.buffer_dropped() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
