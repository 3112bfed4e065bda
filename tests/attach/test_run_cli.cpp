// `stallscope run` and `stallscope ctl` from the command line: exit status,
// signal forwarding, the early report while the command goes on, capture
// toggling, and programs that cannot be attached.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "skip_visibly.hpp"
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

// The static probe is built only where a static libc is installed.
boost::test_tools::assertion_result have_a_static_binary(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(!std::string(ATTACH_STATIC).empty());
  r.message() << "no static libc here: the static probe was not built";
  return r;
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

BOOST_AUTO_TEST_CASE(refuses_a_static_binary_clearly,
                     *stallscope::test::skip_unless(have_a_static_binary)) {
  const std::string static_bin = ATTACH_STATIC;
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

// --expect on run: a failed expectation turns the command's 0 into 3 and is
// named; a met one keeps 0; a malformed one is refused before the command runs.
BOOST_AUTO_TEST_CASE(expect_gates_the_run_on_its_report) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const std::string done = t.path() + "/done";
  BOOST_TEST(run(run_argv(t.path() + "/fail", {"--expect", "step<1ms", "--expect", "step>=1ms"},
                          {kChild, "steps", "12", "5", done}),
                 log, 30) == 3,
             slurp(log));
  BOOST_TEST(slurp(log).find("expectation failed: step<1ms") != std::string::npos, slurp(log));
  BOOST_TEST(slurp(log).find("expectation met: step>=1ms") != std::string::npos, slurp(log));
  BOOST_TEST(exists(t.path() + "/fail/report.json"));  // the report is kept either way
  BOOST_TEST(run(run_argv(t.path() + "/met", {"--expect", "step >= 1ms"},
                          {kChild, "steps", "12", "5", done}),
                 log, 30) == 0,
             slurp(log));
  std::filesystem::remove(done);
  BOOST_TEST(run(run_argv(t.path() + "/bad", {"--expect", "data_stal<5%"},
                          {kChild, "steps", "12", "5", done}),
                 log, 30) == 2,
             slurp(log));
  BOOST_TEST(slurp(log).find("--expect 'data_stal<5%': unknown metric 'data_stal'") !=
                 std::string::npos,
             slurp(log));
  BOOST_TEST(!exists(done));  // refused before the command ran
}

// --headspace needs the Python hooks; a bad K is a usage error; both are
// refused before a run directory is claimed or the command runs.
BOOST_AUTO_TEST_CASE(headspace_is_refused_where_it_cannot_replay) {
  TempDir t;
  const std::string log = t.path() + "/log", done = t.path() + "/done";
  BOOST_TEST(run(run_argv(t.path() + "/a", {"--headspace"}, {kChild, "steps", "12", "5", done}),
                 log, 20) == 2);
  BOOST_TEST(slurp(log).find("--headspace replays the batches of PyTorch DataLoaders") !=
                 std::string::npos,
             slurp(log));
  BOOST_TEST(!exists(t.path() + "/a"));
  BOOST_TEST(run(run_argv(t.path() + "/b", {"--headspace=0"}, {kChild, "steps", "12", "5", done}),
                 log, 20) == 2);
  BOOST_TEST(slurp(log).find("--headspace=0: expected a batch count") != std::string::npos,
             slurp(log));
  BOOST_TEST(!exists(done));
}

// `stallscope tune` on a job whose report proposes no setting stops after
// the first run (exit 0, tune.json with one trial, STALLSCOPE_TRIAL=1 in
// the job's environment); a job that fails as is exits 1 naming why; the
// usage errors exit 2.
BOOST_AUTO_TEST_CASE(tune_stops_at_once_and_refuses_bad_use) {
  TempDir t;
  const std::string log = t.path() + "/log", done = t.path() + "/done";
  const std::string out = t.path() + "/tune";
  BOOST_TEST_REQUIRE(run({kRun, "tune", "--out", out, "--steps", "5", "--start-step", "2", "--",
                          kChild, "steps", "12", "5", done},
                         log, 60) == 0,
                     slurp(log));
  const auto doc = nlohmann::json::parse(slurp(out + "/tune.json"), nullptr, false);
  BOOST_TEST_REQUIRE(doc.is_object(), slurp(log));
  BOOST_TEST(doc["schema"] == "stallscope.tune");
  BOOST_TEST(doc["trials"].size() == 1u);
  BOOST_TEST(doc["best"] == 0);
  BOOST_TEST(doc["runs"] == 0);
  BOOST_TEST(doc["trials"][0]["outcome"] == "baseline");
  BOOST_TEST(doc["trials"][0]["step_p50_ms"].get<double>() > 0);
  BOOST_TEST(doc["stop_reason"] == "the report proposes no setting to try", doc.dump());
  BOOST_TEST(exists(out + "/trial-0/report.json"));
  BOOST_TEST(slurp(log).find("stopped: the report proposes no setting to try") != std::string::npos,
             slurp(log));
  // The job as is fails: exit 1, and the table says why.
  const std::string out2 = t.path() + "/tune2", log2 = t.path() + "/log2";
  BOOST_TEST(run({kRun, "tune", "--out", out2, "--", kChild, "exit", "3"}, log2, 60) == 1,
             slurp(log2));
  BOOST_TEST(slurp(log2).find("stopped: the first run failed: exit status 3") != std::string::npos,
             slurp(log2));
  // Usage: no command; an --out holding files; under a launcher.
  BOOST_TEST(run({kRun, "tune", "--out", t.path() + "/x"}, log, 20) == 2);
  BOOST_TEST(run({kRun, "tune", "--out", out, "--", kChild, "exit", "0"}, log, 20) == 2);
  BOOST_TEST(slurp(log).find("is not empty") != std::string::npos, slurp(log));
  BOOST_TEST(run({kRun, "tune", "--out", t.path() + "/y", "--", kChild, "exit", "0"}, log, 20,
                 {"RANK=1", "WORLD_SIZE=2"}) == 2);
  BOOST_TEST(slurp(log).find("started by a launcher") != std::string::npos, slurp(log));
  BOOST_TEST(run({kRun, "tune", "--headspace=x", "--out", t.path() + "/z", "--", kChild, "exit",
                  "0"},
                 log, 20) == 2);
}

// `stallscope diff` on a tune directory: each trial against the one it
// built on; RUN_B beside a tune directory is a usage error.
BOOST_AUTO_TEST_CASE(diff_reads_a_tune_directory) {
  TempDir t;
  const std::string log = t.path() + "/log", done = t.path() + "/done";
  const std::string out = t.path() + "/tune";
  for (const char* name : {"trial-0", "trial-1"})
    BOOST_TEST_REQUIRE(run(run_argv(out + "/" + name, {}, {kChild, "steps", "12", "5", done}),
                           log, 30) == 0,
                       slurp(log));
  std::ofstream(out + "/tune.json") << R"({"schema":"stallscope.tune","trials":[
    {"index":0,"based_on":-1,"added":[],"outcome":"baseline","run_dirs":[")" << out
                                    << R"(/trial-0"]},
    {"index":1,"based_on":0,"added":["dataloader.num_workers=2"],"remedy_id":"more_workers",
     "remedy_title":"more workers","outcome":"better","run_dirs":[")" << out << R"(/trial-1"]},
    {"index":2,"based_on":1,"added":["dataloader.pin_memory=true"],"outcome":"setting failed",
     "failure":"exit status 135","run_dirs":[]}]})";
  BOOST_TEST(run({kRun, "diff", out}, log, 60) == 0, slurp(log));
  const std::string text = slurp(log);
  BOOST_TEST(text.find("trial 1 (more workers: --set dataloader.num_workers=2) against trial 0: "
                       "better") != std::string::npos,
             text);
  BOOST_TEST(text.find("mean steady step") != std::string::npos, text);
  BOOST_TEST(text.find("the setting failed: exit status 135") != std::string::npos, text);
  // --html: the trials' table, then a section per trial (the failed one with its failure).
  const std::string page = t.path() + "/tune.html";
  BOOST_TEST(run({kRun, "diff", out, "--html", page}, log, 60) == 0, slurp(log));
  const std::string html = slurp(page);
  const size_t table = html.find("<tr><th>trial</th><th>setting</th><th>step p50 ms</th>");
  BOOST_TEST(table != std::string::npos, html);
  const size_t row = html.find("<tr><td>1</td><td>more workers: --set dataloader.num_workers=2</td>");
  BOOST_TEST(row != std::string::npos, html);
  BOOST_TEST(row > table);
  BOOST_TEST(html.find("<h2>trial 1 (more workers: --set dataloader.num_workers=2) against trial 0: better</h2>") !=
                 std::string::npos,
             html);
  BOOST_TEST(html.find("<svg class=diffparts") != std::string::npos, html);
  BOOST_TEST(html.find("<p>the setting failed: exit status 135</p>") != std::string::npos, html);
  const std::string log2 = t.path() + "/log2";
  BOOST_TEST(run({kRun, "diff", out, "--trial", "2"}, log2, 60) == 0, slurp(log2));
  BOOST_TEST(slurp(log2).find("trial 1 (") == std::string::npos, slurp(log2));
  BOOST_TEST(slurp(log2).find("trial 2 (--set dataloader.pin_memory=true) against trial 1") !=
                 std::string::npos,
             slurp(log2));
  BOOST_TEST(run({kRun, "diff", out, out + "/trial-1"}, log, 20) == 2, slurp(log));
  BOOST_TEST(run({kRun, "diff", out + "/trial-0"}, log, 20) == 2, slurp(log));
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

// ---- --set: settings tried without editing the program

// The STALLSCOPE_SET line the command printed with `env` ("" when none).
std::string set_line(const std::string& log) {
  const std::string text = slurp(log);
  const size_t at = text.find("\nSTALLSCOPE_SET=");
  if (at == std::string::npos) return "";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

BOOST_AUTO_TEST_CASE(set_normalizes_each_setting_into_stallscope_set) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const std::vector<std::string> sets = {"--set", "dataloader.num_workers=04",
                                         "--set", "dataloader[train.py:0042].pin_memory=YES",
                                         "--set", "dataloader[3].prefetch_factor=None",
                                         "--set", " dataloader[MyDataset].persistent_workers = off",
                                         "--set", "loader.workers=4",
                                         "--set", "loader.read_size=256k"};
  BOOST_TEST_REQUIRE(run(run_argv(t.path() + "/run", sets, {"/usr/bin/env"}), log, 30) == 0,
                     slurp(log));
  BOOST_TEST(
      set_line(log) ==
          "STALLSCOPE_SET=dataloader.num_workers=4;dataloader[train.py:42].pin_memory=true;"
          "dataloader[3].prefetch_factor=none;dataloader[MyDataset].persistent_workers=false;"
          "loader.workers=4;loader.read_size=262144",
      slurp(log));
  const std::string text = slurp(log);
  BOOST_TEST(text.find("stallscope run: will try dataloader.num_workers=4 on every DataLoader\n") !=
                 std::string::npos,
             text);
  BOOST_TEST(text.find("will try dataloader[train.py:42].pin_memory=true on the DataLoader "
                       "constructed at train.py:42\n") != std::string::npos,
             text);
  BOOST_TEST(text.find("will try loader.workers=4 on stallscope's loader") != std::string::npos);
  // Said before the command ran: ahead of its output.
  BOOST_TEST(text.find("will try") < text.find("\nSTALLSCOPE_SET="));
  BOOST_TEST(text.find("not applied") == std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(set_names_a_bad_key_value_or_selector_and_runs_the_program_untouched) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"dataloader.num_wrokers=4",
       "unknown field 'num_wrokers' (known: num_workers, prefetch_factor, persistent_workers, "
       "pin_memory, sharing_strategy)"},
      {"dataloader.sharing_strategy=shm",
       "bad value 'shm' for dataloader.sharing_strategy (not file_descriptor or file_system)"},
      {"dataloader.num_workers=lots",
       "bad value 'lots' for dataloader.num_workers (not an integer in [0, 1024])"},
      {"dataloader.prefetch_factor=0", "bad value '0' for dataloader.prefetch_factor"},
      {"dataloader.pin_memory=maybe", "bad value 'maybe' for dataloader.pin_memory"},
      {"dataloader[a b].num_workers=2",
       "bad selector '[a b]' (expected [N], [file:line] or [DatasetClass])"},
      {"dataloader[train.py:42.num_workers=2", "has no closing ']'"},
      {"loader.workers=0", "bad value '0' for loader.workers (not an integer in [1, 256])"},
      {"loader.wrokers=2", "unknown field 'wrokers' (known: workers, prefetch, queue_depth,"},
      {"loader[0].workers=2", "the loader namespace takes no selector"},
      {"torch.num_threads=2", "unknown namespace 'torch' (known: dataloader, loader)"},
      {"dataloader.num_workers", "no '=' (expected KEY=VALUE)"},
      {"dataloader.num_workers=2;loader.workers=2", "';' separates settings"}};
  std::vector<std::string> args;
  for (const auto& [arg, why] : bad) args.insert(args.end(), {"--set", arg});
  // Bad ones only: the command sees no STALLSCOPE_SET at all.
  BOOST_TEST_REQUIRE(run(run_argv(t.path() + "/a", args, {"/usr/bin/env"}), log, 30) == 0,
                     slurp(log));
  const std::string text = slurp(log);
  for (const auto& [arg, why] : bad) {
    BOOST_TEST_CONTEXT(arg) {
      const std::string head = "stallscope: --set '" + arg + "': ";
      const size_t at = text.find(head);
      BOOST_TEST_REQUIRE(at != std::string::npos, text);
      const std::string line = text.substr(at, text.find('\n', at) - at);
      BOOST_TEST(line.find(why) != std::string::npos, line);
      BOOST_TEST(line.substr(line.size() - 13) == "; not applied", line);
    }
  }
  BOOST_TEST(set_line(log).empty(), set_line(log));
  BOOST_TEST(text.find("will try") == std::string::npos, text);
  // With a good one among them, only the good one is passed.
  const std::string log2 = t.path() + "/log2";
  BOOST_TEST_REQUIRE(run(run_argv(t.path() + "/b",
                                  {"--set", "loader.wrokers=2", "--set", "dataloader.num_workers=2",
                                   "--set", "dataloader[x y].pin_memory=1"},
                                  {"/usr/bin/env"}),
                         log2, 30) == 0,
                     slurp(log2));
  BOOST_TEST(set_line(log2) == "STALLSCOPE_SET=dataloader.num_workers=2", slurp(log2));
}

// The sample trainer applies loader.* over its flags, refuses what it
// cannot apply (STALLSCOPE_SET set by hand is checked again), and marks both
// in its trace.
BOOST_AUTO_TEST_CASE(the_sample_trainer_applies_loader_settings_and_marks_them) {
  TempDir t;
  const std::string ds = t.path() + "/ds", log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(run({GEN_DATASET_BIN, "--out", ds, "--samples", "64", "--size-kb", "4"},
                         t.path() + "/gen.log", 60) == 0,
                     slurp(t.path() + "/gen.log"));
  const std::vector<std::string> trainer = {
      TRAINER_BIN,          "--data", ds,         "--steps",  "6",
      "--compute-ms",       "1",      "--device", "emulated", "--loader-workers=1",
      "--loader-prefetch=2"};
  BOOST_TEST_REQUIRE(
      run(run_argv(run_dir, {"--set", "loader.workers=3", "--set", "dataloader.num_workers=4"},
                   trainer),
          log, 90, {"STALLSCOPE_SET=loader.prefetch=0"}) == 0,
      slurp(log));
  std::string text = slurp(log);
  BOOST_TEST(
      text.find("stallscope: set applied loader.workers=3 at - (was 1)\n") != std::string::npos,
      text);
  // --set replaced the inherited variable: its bad item never reached the trainer.
  // (The report's remedies may name loader.prefetch as a setting to try.)
  BOOST_TEST(text.find("STALLSCOPE_SET=loader.prefetch") == std::string::npos, text);
  BOOST_TEST(text.find("set refused loader.prefetch") == std::string::npos, text);
  BOOST_TEST(text.find("set applied loader.prefetch") == std::string::npos, text);
  BOOST_TEST(text.find("num_workers") != std::string::npos);  // "will try", not the trainer
  BOOST_TEST(text.find("set refused") == std::string::npos, text);
  // In effect: the loader's recorded configuration gives the preprocessing
  // stage 3 workers, not the flag's 1.
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object(), text);
  int with_3 = 0;
  for (const auto& st : rep["ranks"][0]["stages"])
    with_3 += st.contains("workers") && st["workers"].get<double>() == 3.0;
  BOOST_TEST(with_3 == 1, rep["ranks"][0]["stages"].dump());
  // The step timelines: a labelled lane per loader thread and activity.
  const auto& timelines = rep["ranks"][0]["timelines"];
  BOOST_TEST_REQUIRE(timelines.size() >= 1u, rep["ranks"][0].dump());
  for (const auto& tl : timelines) {
    std::set<std::string> names;
    int loader_lanes = 0;
    for (const auto& l : tl["lanes"]) {
      const std::string name = l["name"].get<std::string>(), kind = l["kind"].get<std::string>();
      BOOST_TEST(names.insert(name).second, "lane named once: " << name);
      if ((kind == "reads" || kind == "preprocess") && name.rfind("ss-loader", 0) == 0 &&
          name.find(" tid ") != std::string::npos)
        ++loader_lanes;
    }
    BOOST_TEST(loader_lanes >= 1, tl.dump());
  }
  const std::string chrome = t.path() + "/trace.json";
  BOOST_TEST_REQUIRE(run({kRun, "export", run_dir, "--chrome", chrome}, log, 60) == 0, slurp(log));
  BOOST_TEST(slurp(chrome).find("set applied loader.workers=3 at - (was 1)") != std::string::npos);

  // By hand, without stallscope run --set: the trainer checks each item.
  const std::string log2 = t.path() + "/log2", run2 = t.path() + "/run2";
  BOOST_TEST_REQUIRE(run(trainer, log2, 90,
                         {"STALLSCOPE_OUT=" + run2,
                          "STALLSCOPE_SET=loader.prefetch=0;loader.pinned=off;"
                          "dataloader[0].num_workers=2;loader.wrokers=2"}) == 0,
                     slurp(log2));
  text = slurp(log2);
  BOOST_TEST(text.find("stallscope: set refused loader.prefetch=0 at -: not an integer in [1, "
                       "1024]\n") != std::string::npos,
             text);
  BOOST_TEST(text.find("stallscope: set applied loader.pinned=false at - (was true)\n") !=
                 std::string::npos,
             text);
  BOOST_TEST(
      text.find("set refused loader.wrokers=2 at -: unknown field 'wrokers'") != std::string::npos,
      text);
  BOOST_TEST(text.find("num_workers") == std::string::npos, text);  // not the loader's
  const std::string chrome2 = t.path() + "/trace2.json";
  BOOST_TEST_REQUIRE(run({kRun, "export", run2, "--chrome", chrome2}, log2, 60) == 0, slurp(log2));
  BOOST_TEST(slurp(chrome2).find("set refused loader.prefetch=0 at -") != std::string::npos);
}

// ---- --exit-after-window

std::vector<pid_t> read_pids(const std::string& file) {
  std::istringstream in(slurp(file));
  std::vector<pid_t> pids;
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

bool gone(pid_t pid) { return !exists("/proc/" + std::to_string(pid)); }

// A job that forks a worker and a setsid() daemon, ignores SIGTERM and
// never ends by itself.
void check_the_family_is_ended(const std::vector<std::string>& flags, const std::string& said) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string pid_file = t.path() + "/pids";
  std::vector<std::string> args = {"--start-step", "2", "--steps", "5"};
  args.insert(args.end(), flags.begin(), flags.end());
  const int code = run(run_argv(run_dir, args, {kChild, "family", "20", pid_file}), log, 100);
  const std::vector<pid_t> pids = read_pids(pid_file);
  for (pid_t p : pids) {
    BOOST_TEST(gone(p), "pid " + std::to_string(p) + " is still there");
    if (!gone(p)) ::kill(p, SIGKILL);  // never left to the next test
  }
  BOOST_TEST_REQUIRE(pids.size() == 3u, slurp(log));
  BOOST_TEST(code == 0, slurp(log));
  const std::string text = slurp(log);
  BOOST_TEST(text.find("the step window is complete") != std::string::npos, text);
  BOOST_TEST(text.find(said) != std::string::npos, text);
  BOOST_TEST(text.find("exit status 0\n") != std::string::npos, text);
  // The report was written before the end, and every file reads to its end.
  BOOST_TEST(exists(run_dir + "/report.json"), text);
  const std::string info = t.path() + "/info";
  BOOST_TEST(run({kRun, "info", run_dir}, info, 60) == 0, slurp(info));
  BOOST_TEST(slurp(info).find("lost") == std::string::npos, slurp(info));
  // Each recorder completed its file (End chunk) before the kill.
  BOOST_TEST(
      slurp(info).find("run: 4 files (4 complete, 0 cut, 0 unreadable)") != std::string::npos,
      slurp(info));
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(run_dir))
    files += e.path().extension() == ".sst";
  // main, worker, daemon, and the setsid() process between them (it exits)
  BOOST_TEST(files == 4u, slurp(info));
}

BOOST_AUTO_TEST_CASE(exit_after_window_kills_workers_and_setsid_children_and_exits_0) {
  check_the_family_is_ended({"--exit-after-window"}, "ended the job (SIGKILL to 3 process(es))");
}

BOOST_AUTO_TEST_CASE(exit_after_window_term_sends_sigterm_then_sigkill_after_the_grace) {
  check_the_family_is_ended({"--exit-after-window=term", "--exit-grace", "1"},
                            "ended the job (SIGTERM to 3 process(es), then SIGKILL to 3 still "
                            "running after 1 s");
}

BOOST_AUTO_TEST_CASE(exit_after_window_keeps_the_commands_status_when_it_ends_first) {
  TempDir t;
  const std::string log = t.path() + "/log";
  BOOST_TEST(run(run_argv(t.path() + "/a", {"--exit-after-window"},
                          {kChild, "steps", "4", "5", t.path() + "/done"}),
                 log, 30) == 0,
             slurp(log));
  BOOST_TEST(
      run(run_argv(t.path() + "/b", {"--exit-after-window"}, {kChild, "exit", "3"}), log, 30) == 3);
  BOOST_TEST(slurp(log).find("ended the job") == std::string::npos, slurp(log));
  BOOST_TEST(run(run_argv(t.path() + "/c", {"--exit-after-window=soon"}, {kChild, "exit", "0"}),
                 log, 30) == 2);
  BOOST_TEST(slurp(log).find("--exit-after-window=soon: expected kill (the default) or term") !=
                 std::string::npos,
             slurp(log));
}

BOOST_AUTO_TEST_CASE(exit_after_window_still_forwards_signals_before_the_window_closes) {
  TempDir t;
  const std::string log = t.path() + "/log", file = t.path() + "/got-signal";
  const pid_t pid = start(
      run_argv(t.path() + "/run", {"--exit-after-window"}, {kChild, "wait-signal", file}), log);
  BOOST_TEST_REQUIRE(eventually([&] { return exists(file + ".ready"); }, 15), slurp(log));
  ::kill(pid, SIGINT);
  BOOST_TEST(exit_code(wait_for_exit(pid, 30)) == 0, slurp(log));  // the command's status
  BOOST_TEST(slurp(file) == "signal 2\n");
  BOOST_TEST(slurp(log).find("ended the job") == std::string::npos, slurp(log));
}

// Ranks a launcher started by hand (RANK and WORLD_SIZE, no job id), each a
// `stallscope run --out DIR`: one directory for both (their parent's), rank
// 0's report covers both; the same command again is a new job: DIR-2.
BOOST_AUTO_TEST_CASE(ranks_of_one_launcher_with_out_share_the_directory) {
  TempDir t;
  const std::string dir = t.path() + "/job", log = t.path() + "/log";
  auto rank = [&](int r) {
    return "RANK=" + std::to_string(r) + " WORLD_SIZE=2 '" + std::string(STALLSCOPE_BIN) +
           "' run --out '" + dir + "' --start-step 2 --steps 5 -- '" + kChild + "' steps 30 10 '" +
           t.path() + "/done" + std::to_string(r) + "'";
  };
  const std::string both = rank(0) + " & " + rank(1) + " & wait";
  for (int job = 1; job <= 2; ++job) {
    const int code = run({"/bin/sh", "-c", both}, log, 120);
    BOOST_TEST_REQUIRE(code == 0, slurp(log));
  }
  std::vector<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(t.path()))
    if (e.is_directory()) dirs.push_back(e.path().filename().string());
  std::sort(dirs.begin(), dirs.end());
  BOOST_TEST((dirs == std::vector<std::string>{"job", "job-2"}), slurp(log));
  for (const std::string& d : {dir, dir + "-2"}) {
    const auto rep = report_json(d);
    BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
    BOOST_TEST(rep["ranks"].size() == 2u, slurp(log));
  }
}

BOOST_AUTO_TEST_SUITE_END()
