// Regressions: a note of stallscope's (a bad STALLSCOPE_* value, a full
// disk, "tracing off") written where nobody reads, or after the program
// put a file of its own at descriptor 2 (RELIABILITY.md 41). Each case
// failed before the fix: the program died of SIGPIPE (exit status 141 in a
// shell) before main, or found the note inside its data file.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "preload/preload_run.hpp"

using namespace stallscope::test;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string repro_helper(const std::string& name) { return build_dir() + "/tests/repro/" + name; }

// Runs argv (under the shim when `preload`) with stdout a pipe read here
// and stderr a pipe whose read end was closed before the program started:
// every write to it fails with EPIPE and raises SIGPIPE.
RunResult run_with_dead_stderr(const std::vector<std::string>& argv,
                               std::map<std::string, std::string> env, bool preload) {
  if (preload) env.emplace("LD_PRELOAD", shim());
  RunResult r;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  if (::pipe2(err, O_CLOEXEC) != 0) return r;
  ::close(err[0]);  // no reader anywhere, from the start
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::signal(SIGPIPE, SIG_DFL);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.term_signal = WTERMSIG(st);
  return r;
}

std::string lines(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "LINE " + std::to_string(i) + "\n";
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repro_notes)

// The recorder's note on a bad value (it parses STALLSCOPE_FLUSH_MS),
// written at start, before main.
BOOST_AUTO_TEST_CASE(a_recorder_note_on_a_dead_stderr_pipe_never_kills_the_program) {
  TempDir dir;
  const RunResult r = run_with_dead_stderr({repro_helper("note_target"), "lines", "1000"},
                                           {{"STALLSCOPE_FLUSH_MS", "soon"},
                                            {"STALLSCOPE_OUT", dir / "run"}},
                                           true);
  BOOST_TEST(r.term_signal == 0, "killed by signal " << r.term_signal);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out == lines(1000));
}

// The shim's own note on a bad value (it parses STALLSCOPE_PRELOAD_*).
BOOST_AUTO_TEST_CASE(a_shim_note_on_a_dead_stderr_pipe_never_kills_the_program) {
  TempDir dir;
  const RunResult r = run_with_dead_stderr({repro_helper("note_target"), "lines", "1000"},
                                           {{"STALLSCOPE_PRELOAD_WAIT_MIN_US", "soon"},
                                            {"STALLSCOPE_OUT", dir / "run"}},
                                           true);
  BOOST_TEST(r.term_signal == 0, "killed by signal " << r.term_signal);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out == lines(1000));
}

// The helper itself, without the shim: SIGPIPE blocked while the note is
// written, and the SIGPIPE that write raised taken back — but a SIGPIPE
// the program had pending before stays pending.
BOOST_AUTO_TEST_CASE(a_note_leaves_the_programs_own_sigpipe_and_no_other) {
  const RunResult plain = run_with_dead_stderr({repro_helper("note_writer"), "plain"}, {}, false);
  BOOST_TEST(plain.term_signal == 0, "killed by signal " << plain.term_signal);
  BOOST_TEST(plain.out == "ALIVE\n");
  const RunResult blocked =
      run_with_dead_stderr({repro_helper("note_writer"), "blocked"}, {}, false);
  BOOST_TEST(blocked.exit_code == 0);
  BOOST_TEST(blocked.out == "PENDING 0\n");  // none of the note's own left behind
  const RunResult pending =
      run_with_dead_stderr({repro_helper("note_writer"), "pending"}, {}, false);
  BOOST_TEST(pending.exit_code == 0);
  BOOST_TEST(pending.out == "PENDING 1\n");  // the program's own, kept
}

// A program that closed 0-2 and opened its data file as descriptor 2, then
// forked a worker: the worker's recorder starts and notes the bad value —
// on the program's real stderr at its start, never into the data file.
BOOST_AUTO_TEST_CASE(a_note_never_lands_in_the_file_the_program_opened_at_descriptor_2) {
  TempDir dir;
  const std::string data = dir / "data";
  const RunResult r = run({repro_helper("note_target"), "fd2file", data},
                          {{"STALLSCOPE_OUT", dir / "run"}, {"STALLSCOPE_FLUSH_MS", "soon"}},
                          true, 30);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                                << ": " << r.err);
  // The value does produce a note: the parent's, at its start.
  BOOST_TEST(r.err.find("STALLSCOPE_FLUSH_MS") != std::string::npos, r.err);
  BOOST_TEST(slurp(data) == "program record 1\nprogram record 2\n");
}

BOOST_AUTO_TEST_SUITE_END()
