// The live status line of `stallscope run` (integrations/cli/cmd_run_live.cpp):
// under a pseudo-terminal the line appears, rewritten in place, with the step
// count and the step p50, and is erased before the report; with stderr piped,
// or with --quiet on a terminal, it never appears.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"

using namespace attach;

namespace {

const std::string kRun = STALLSCOPE_BIN;

std::vector<std::string> live_argv(const std::string& out, const std::vector<std::string>& extra,
                                   const char* mode = "steps") {
  // 80 steps of 20 ms: about 2 s, several redraws at 4 a second.
  std::vector<std::string> a = {kRun, "run", "--out", out, "--start-step", "5", "--steps", "30"};
  a.insert(a.end(), extra.begin(), extra.end());
  for (const char* s : {"--", ATTACH_CHILD, mode, "80", "20"}) a.push_back(s);
  a.push_back(out + ".done");
  return a;
}

// Runs argv with stdin, stdout and stderr on a fresh pseudo-terminal;
// returns everything written to it (empty on failure or after timeout_s).
std::string run_on_pty(const std::vector<std::string>& argv, double timeout_s, int* rc) {
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return "";
  if (pid == 0) {
    ::setenv("STALLSCOPE_PRELOAD_LIB", preload_lib().c_str(), 1);
    std::vector<char*> v;
    for (const auto& s : argv) v.push_back(const_cast<char*>(s.c_str()));
    v.push_back(nullptr);
    ::execv(v[0], v.data());
    ::_exit(127);
  }
  std::string out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the last process holding the terminal ended
    out.append(buf, size_t(n));
  }
  ::close(master);
  int st = 0;
  if (::waitpid(pid, &st, WNOHANG) != pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  *rc = exit_code(st);
  return out;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_live)

BOOST_AUTO_TEST_CASE(live_line_on_a_terminal_with_steps_and_p50_then_the_report) {
  TempDir t;
  int rc = -1;
  const std::string out = run_on_pty(live_argv(t.path() + "/r", {}), 60, &rc);
  BOOST_TEST_REQUIRE(rc == 0, out);
  BOOST_TEST(count(out, "\rstallscope: ") >= 1u, out);
  BOOST_TEST(out.find(" steps (capture ") != std::string::npos, out);
  BOOST_TEST(out.find(" · step p50 ") != std::string::npos, out);
  BOOST_TEST(out.find(" ms · ") != std::string::npos, out);
  // Steps of CPU work only: the rest of the step, on CPU, is the largest.
  BOOST_TEST(out.find(" · largest so far: compute (CPU) ") != std::string::npos, out);
  // Rewritten in place (carriage returns and erase-to-end, never a newline
  // after it) and erased before the report.
  const size_t last = out.rfind("\rstallscope: ");
  BOOST_TEST_REQUIRE(last != std::string::npos);
  const size_t nl = out.find('\n', last);
  BOOST_TEST(out.substr(last, nl - last).find("\033[K\r") != std::string::npos, out);
  const size_t report = out.find("stallscope report");
  BOOST_TEST_REQUIRE(report != std::string::npos, out);
  BOOST_TEST(report > last);
  BOOST_TEST(out.find("\r\033[K", last) < report);
}

// Steps that wait 20 ms for data and compute 5: the line names the wait,
// at about 80 % of the step (anything from 55 % holds on a busy machine).
BOOST_AUTO_TEST_CASE(live_line_names_the_data_wait_as_the_largest_part) {
  TempDir t;
  int rc = -1;
  const std::string out = run_on_pty(live_argv(t.path() + "/r", {}, "waits"), 60, &rc);
  BOOST_TEST_REQUIRE(rc == 0, out);
  const size_t at = out.rfind(" · largest so far: data wait ");
  BOOST_TEST_REQUIRE(at != std::string::npos, out);
  const int share = std::atoi(out.c_str() + at + std::string(" · largest so far: data wait ").size());
  BOOST_TEST(share >= 55, out);
  BOOST_TEST(share <= 100, out);
}

BOOST_AUTO_TEST_CASE(no_live_line_when_stderr_is_piped) {
  TempDir t;
  const std::string log = t.path() + "/log";
  BOOST_TEST_REQUIRE(run(live_argv(t.path() + "/r", {}), log, 60) == 0);
  const std::string out = slurp(log);
  BOOST_TEST(out.find("stallscope report") != std::string::npos, out);
  BOOST_TEST(out.find("stallscope: ") == std::string::npos, out);
  BOOST_TEST(out.find("\033[K") == std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(no_live_line_with_quiet_on_a_terminal) {
  TempDir t;
  int rc = -1;
  const std::string out = run_on_pty(live_argv(t.path() + "/r", {"--quiet"}), 60, &rc);
  BOOST_TEST_REQUIRE(rc == 0, out);
  BOOST_TEST(out.find("stallscope report") != std::string::npos, out);
  BOOST_TEST(out.find("stallscope: ") == std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
