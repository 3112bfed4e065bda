// `stallscope run` and `stallscope ctl` from the command line: exit status,
// signal forwarding, the early report while the command goes on, capture
// toggling, and programs that cannot be attached.
#include <signal.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"

using namespace attach;

namespace {

const std::string kRun = STALLSCOPE_BIN;
const std::string kChild = ATTACH_CHILD;

std::vector<std::string> run_argv(const std::string& out, std::vector<std::string> extra,
                                  const std::vector<std::string>& cmd) {
  std::vector<std::string> a = {kRun, "run", "--out", out};
  a.insert(a.end(), extra.begin(), extra.end());
  a.push_back("--");
  a.insert(a.end(), cmd.begin(), cmd.end());
  return a;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_cli)

BOOST_AUTO_TEST_CASE(exits_with_the_commands_status) {
  TempDir t;
  const std::string log = t.path() + "/log";
  BOOST_TEST(run(run_argv(t.path() + "/a", {}, {kChild, "exit", "0"}), log, 20) == 0);
  BOOST_TEST(run(run_argv(t.path() + "/b", {}, {kChild, "exit", "3"}), log, 20) == 3);
  // Killed by a signal: 128 + the signal, as a shell reports it.
  BOOST_TEST(run(run_argv(t.path() + "/c", {}, {kChild, "raise", "9"}), log, 20) == 137);
  BOOST_TEST(run(run_argv(t.path() + "/d", {}, {kChild, "raise", "15"}), log, 20) == 143);
  BOOST_TEST(run(run_argv(t.path() + "/e", {}, {"no-such-command-xyz"}), log, 20) == 127);
  BOOST_TEST(run({kRun, "run", "--out", t.path() + "/f"}, log, 20) == 2);  // no command
}

BOOST_AUTO_TEST_CASE(refuses_a_static_binary_clearly) {
  const std::string static_bin = ATTACH_STATIC;
  if (static_bin.empty()) {
    BOOST_TEST_MESSAGE("SKIP: no static libc here");
    return;
  }
  TempDir t;
  const std::string log = t.path() + "/log";
  BOOST_TEST(run(run_argv(t.path() + "/a", {}, {static_bin}), log, 20) == 2);
  BOOST_TEST(slurp(log).find("statically linked") != std::string::npos, slurp(log));
}

// Regression: STALLSCOPE_PRELOAD_LIB=/etc/passwd was accepted; the loader
// skipped it and the run ended with no trace. The library is checked first
// (read, not loaded) and refused with the variable, the path and the reason.
BOOST_AUTO_TEST_CASE(a_preload_lib_that_is_not_the_shim_is_refused_by_name) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/etc/passwd", "is not an ELF file"},
      {t.path(), "is not a regular file"},
      {ATTACH_TRACE_LIB,
       "is a shared object, but not stallscope's preload shim (it does not "
       "define stallscope_preload_nccl_plugin_v1)"},
      {kChild, "but not stallscope's preload shim"}};  // a PIE is a shared object too
  int k = 0;
  for (const auto& [lib, why] : cases) {
    BOOST_TEST_CONTEXT(lib) {
      const std::string out = t.path() + "/run" + std::to_string(k++);
      // 1, not the command's 0: it never started.
      BOOST_TEST(run(run_argv(out, {}, {kChild, "exit", "0"}), log, 20,
                     {"STALLSCOPE_PRELOAD_LIB=" + lib}) == 1,
                 slurp(log));
      const std::string said = slurp(log).substr(slurp(log).rfind("stallscope run: "));
      BOOST_TEST(said.find("stallscope run: STALLSCOPE_PRELOAD_LIB='" + lib + "' ") == 0u, said);
      BOOST_TEST(said.find(why) != std::string::npos, said);
    }
  }
  // The shim itself passes.
  if (std::string(ATTACH_PRELOAD).empty()) return;
  BOOST_TEST(run(run_argv(t.path() + "/ok", {}, {kChild, "exit", "0"}), log, 20,
                 {std::string("STALLSCOPE_PRELOAD_LIB=") + ATTACH_PRELOAD}) == 0,
             slurp(log));
}

// The command's signal dispositions are those stallscope inherited: SIGHUP
// stays ignored under nohup, and SIGXFSZ, which stallscope ignores itself
// (a write past a file-size limit fails instead of killing it), reaches the
// command at its default.
BOOST_AUTO_TEST_CASE(the_command_inherits_the_signal_dispositions_it_was_given) {
  TempDir t;
  // The command's ignored-signal mask, from the log (stallscope writes its
  // own lines there too).
  auto ignored_mask = [](const std::string& log) -> unsigned long long {
    const std::string text = slurp(log);
    const size_t at = text.find("SigIgn:");
    return at == std::string::npos ? ~0ull : std::stoull(text.substr(at + 7), nullptr, 16);
  };
  const auto bit = [](int sig) { return 1ull << (sig - 1); };
  const std::vector<std::string> show = {"grep", "SigIgn", "/proc/self/status"};
  const std::string plain_log = t.path() + "/plain.log", nohup_log = t.path() + "/nohup.log";
  BOOST_TEST_REQUIRE(run(run_argv(t.path() + "/a", {}, show), plain_log, 20) == 0,
                     slurp(plain_log));
  const unsigned long long plain = ignored_mask(plain_log);
  BOOST_TEST_REQUIRE(plain != ~0ull, slurp(plain_log));
  BOOST_TEST((plain & bit(SIGHUP)) == 0u);
  BOOST_TEST((plain & bit(SIGXFSZ)) == 0u);
  std::vector<std::string> nohup = run_argv(t.path() + "/b", {}, show);
  BOOST_TEST_REQUIRE(exists("/usr/bin/nohup"));  // coreutils
  nohup.insert(nohup.begin(), "/usr/bin/nohup");
  BOOST_TEST_REQUIRE(run(nohup, nohup_log, 20) == 0, slurp(nohup_log));
  const unsigned long long under_nohup = ignored_mask(nohup_log);
  BOOST_TEST((under_nohup & bit(SIGHUP)) != 0u);
  BOOST_TEST((under_nohup & bit(SIGXFSZ)) == 0u);
}

BOOST_AUTO_TEST_CASE(forwards_sigint_to_the_command) {
  TempDir t;
  const std::string log = t.path() + "/log", file = t.path() + "/got-signal";
  const pid_t pid = start(run_argv(t.path() + "/run", {}, {kChild, "wait-signal", file}), log);
  BOOST_TEST_REQUIRE(eventually([&] { return exists(file + ".ready"); }, 15), slurp(log));
  ::kill(pid, SIGINT);  // to stallscope run, not to the command
  const int code = exit_code(wait_for_exit(pid, 20));
  BOOST_TEST(code == 0, slurp(log));  // the command's handler ran and it exited 0
  BOOST_TEST(slurp(file) == "signal 2\n");
}

BOOST_AUTO_TEST_CASE(forwards_sigterm_to_the_command) {
  TempDir t;
  const std::string log = t.path() + "/log", file = t.path() + "/got-signal";
  const pid_t pid = start(run_argv(t.path() + "/run", {}, {kChild, "wait-signal", file}), log);
  BOOST_TEST_REQUIRE(eventually([&] { return exists(file + ".ready"); }, 15), slurp(log));
  ::kill(pid, SIGTERM);
  BOOST_TEST(exit_code(wait_for_exit(pid, 20)) == 0, slurp(log));
  BOOST_TEST(slurp(file) == "signal 15\n");
}

BOOST_AUTO_TEST_CASE(reports_once_the_window_closes_while_the_command_goes_on) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string done = t.path() + "/done";
  // 80 steps of 25 ms; the window closes after step 2 + 5.
  const int code = run(run_argv(run_dir, {"--start-step", "2", "--steps", "5", "--report", "json"},
                                {kChild, "steps", "80", "25", done}),
                       log, 40);
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  BOOST_TEST_REQUIRE(exists(run_dir + "/report.json"), slurp(log));
  // The report was written before the command finished its 80 steps.
  BOOST_TEST(mtime(run_dir + "/report.json") < mtime(done));
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object());
  const auto total = rep["ranks"][0]["steps"]["total"].get<int>();
  BOOST_TEST(total >= 7);
  BOOST_TEST(total <= 20);  // not the 80 steps of the whole run
  BOOST_TEST(slurp(log).find("the step window is complete") != std::string::npos, slurp(log));
  BOOST_TEST(slurp(run_dir + "/report.txt").find("capture window: steps 0 to 7") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(counts_steps_from_ranges_matching_the_step_pattern) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string done = t.path() + "/done";
  const int code = run(run_argv(run_dir, {"--start-step", "2", "--steps", "5"},
                                {kChild, "ranges", "80", "25", done}),
                       log, 40);
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  BOOST_TEST(slurp(log).find("the step window is complete") != std::string::npos, slurp(log));
  BOOST_TEST_REQUIRE(exists(run_dir + "/report.json"), slurp(log));
  BOOST_TEST(mtime(run_dir + "/report.json") < mtime(done));
}

BOOST_AUTO_TEST_CASE(only_rank_0_reports_under_a_launcher) {
  TempDir t;
  const std::string run_dir = t.path() + "/run";
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    pids.push_back(start(run_argv(run_dir, {"--start-step", "2", "--steps", "5"},
                                  {kChild, "steps", "40", "20", t.path() + "/done" + r}),
                         t.path() + "/log" + r,
                         {"TORCHELASTIC_RUN_ID=attach-test", "RANK=" + r, "WORLD_SIZE=2"}));
  }
  for (pid_t p : pids) BOOST_TEST(exit_code(wait_for_exit(p, 40)) == 0);
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(t.path() + "/log0"));
  BOOST_TEST(rep["ranks"].size() == 2u);  // rank 0 waited for rank 1's window
  BOOST_TEST(slurp(t.path() + "/log0").find("writing the report") != std::string::npos);
  BOOST_TEST(slurp(t.path() + "/log1").find("writing the report") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(reports_the_whole_run_when_the_command_ends_first) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(
      run(run_argv(run_dir, {}, {kChild, "steps", "12", "5", t.path() + "/done"}), log, 30) == 0,
      slurp(log));
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
  BOOST_TEST(rep["ranks"][0]["steps"]["total"].get<int>() >= 11);
  BOOST_TEST(slurp(run_dir + "/report.txt").find("covers the whole run") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(time_window_when_no_step_source_appears) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string file = t.path() + "/sig";
  const pid_t pid =
      start(run_argv(run_dir, {"--duration", "1"}, {kChild, "wait-signal", file}), log);
  BOOST_TEST(eventually([&] { return progress_sum(run_dir, "windows_closed") >= 1; }, 15),
             slurp(log));
  BOOST_TEST(slurp(log).find("the time window is complete") != std::string::npos, slurp(log));
  ::kill(pid, SIGTERM);
  BOOST_TEST(exit_code(wait_for_exit(pid, 20)) == 0, slurp(log));
}

BOOST_AUTO_TEST_CASE(start_after_delays_the_time_window) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string file = t.path() + "/sig";
  const pid_t pid = start(
      run_argv(run_dir, {"--start-after", "3", "--duration", "2"}, {kChild, "wait-signal", file}),
      log);
  // Off from the start (nothing captured), on after 3 s, off again after 5 s:
  // windows long enough for a loaded machine to start the command and see
  // each state (the waits are hang guards).
  BOOST_TEST(eventually([&] { return progress_capture_all(run_dir, false); }, 15), slurp(log));
  BOOST_TEST(progress_sum(run_dir, "windows_closed") == 0u);
  BOOST_TEST(eventually([&] { return progress_capture_all(run_dir, true); }, 15), slurp(log));
  BOOST_TEST(eventually([&] { return progress_sum(run_dir, "windows_closed") == 1u; }, 15));
  BOOST_TEST(slurp(log).find("--start-after elapsed") != std::string::npos, slurp(log));
  ::kill(pid, SIGTERM);
  BOOST_TEST(exit_code(wait_for_exit(pid, 20)) == 0, slurp(log));
}

BOOST_AUTO_TEST_CASE(toggles_capture_with_sigusr2_and_ctl) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string done = t.path() + "/done";
  // 6 s of steps: time for the toggles below on a loaded machine.
  const pid_t pid =
      start(run_argv(run_dir, {"--steps", "100000"}, {kChild, "steps", "600", "10", done}), log);
  BOOST_TEST_REQUIRE(eventually([&] { return progress_sum(run_dir, "steps") > 0; }, 15),
                     slurp(log));
  BOOST_TEST(progress_capture_all(run_dir, true));
  ::kill(pid, SIGUSR2);  // stallscope run switches capture off; the command never sees it
  BOOST_TEST(eventually([&] { return progress_capture_all(run_dir, false); }, 15), slurp(log));
  BOOST_TEST(progress_sum(run_dir, "windows_closed") == 1u);
  const uint64_t steps_off = progress_sum(run_dir, "steps");
  BOOST_TEST(run({kRun, "ctl", run_dir, "on"}, log, 10) == 0, slurp(log));
  BOOST_TEST(eventually([&] { return progress_capture_all(run_dir, true); }, 15), slurp(log));
  BOOST_TEST(eventually([&] { return progress_sum(run_dir, "steps") > steps_off; }, 15));
  BOOST_TEST(run({kRun, "ctl", run_dir, "off"}, log, 10) == 0);
  BOOST_TEST(eventually([&] { return progress_sum(run_dir, "windows_closed") == 2u; }, 15));
  BOOST_TEST(run({kRun, "ctl", t.path() + "/not-a-run", "on"}, log, 10) == 1);
  BOOST_TEST(exit_code(wait_for_exit(pid, 30)) == 0, slurp(log));  // SIGUSR2 did not kill it
}

BOOST_AUTO_TEST_SUITE_END()
