// Regressions of issue 46 in `stallscope run` and `stallscope ctl`, each
// failing on the build before its fix:
//
// - `ctl RUN off` on a run whose processes all ended said "applies within
//   100 ms", exited 0 and rewrote RUN/control;
// - --set values past the kernel's limit on one environment string
//   (MAX_ARG_STRLEN) ended in "Argument list too long", exit 127;
// - a suggested `try:` line whose selector was a construction site with a
//   ';' in its file name was refused by `run`;
// - a process the command left (Python's resource tracker under `spawn`)
//   still writing its file when the command exited: the report called the
//   file cut ("no End chunk").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"
#include "attach/attach_util.hpp"
#include "stallscope/analyzer/tune.hpp"

using namespace attach;
using stallscope::format::SamplePart;
using stallscope::testing::RankBuilder;

namespace {

const std::string kCli = STALLSCOPE_BIN;
const std::string kChild = ATTACH_CHILD;
const std::string kLinger = LINGER_CHILD;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::vector<std::string> run_argv(const std::string& out, std::vector<std::string> extra,
                                  const std::vector<std::string>& cmd) {
  std::vector<std::string> a = {kCli, "run", "--out", out};
  a.insert(a.end(), extra.begin(), extra.end());
  a.push_back("--");
  a.insert(a.end(), cmd.begin(), cmd.end());
  return a;
}

// The single progress file of a run ("<host>-r0-<pid>"), "" when not one.
std::string only_progress_file(const std::string& run_dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/progress"))
    if (e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
  return names.size() == 1 ? names[0] : "";
}

// A progress file of process `pid` of this host (the host taken from the
// base `model`), not ended.
std::string write_live_progress(const std::string& run_dir, const std::string& model, int pid) {
  const std::string base = model.substr(0, model.rfind('-') + 1) + std::to_string(pid);
  const std::string path = run_dir + "/progress/" + base;
  std::ofstream(path) << "pid=" << pid
                      << " steps=3 capture=on windows_closed=0 ended=0 step_ms=1.0 wait_ms=0.0 "
                         "kernel_ms=0.0 copy_ms=0.0 comm_ms=0.0\n";
  return path;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repro_cli_run)

BOOST_AUTO_TEST_CASE(ctl_on_a_run_whose_processes_all_ended_says_so_and_writes_nothing) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(run(run_argv(run_dir, {}, {kChild, "exit", "0"}), log, 60) == 0, slurp(log));
  BOOST_TEST_REQUIRE(!only_progress_file(run_dir).empty());
  const bool had_control = exists(run_dir + "/control");
  const std::string control = slurp(run_dir + "/control");
  for (const char* action : {"off", "on"}) {
    const std::string out = t.path() + "/ctl-" + action;
    BOOST_TEST(run({kCli, "ctl", run_dir, action}, out, 20) == 1, slurp(out));
    BOOST_TEST(has(slurp(out), "no process of " + run_dir + " is recording"), slurp(out));
    BOOST_TEST(!has(slurp(out), "within 100 ms"), slurp(out));
    BOOST_TEST(exists(run_dir + "/control") == had_control);
    BOOST_TEST(slurp(run_dir + "/control") == control);
  }
  // `status` still shows what the processes did.
  BOOST_TEST(run({kCli, "ctl", run_dir, "status"}, log, 20) == 0, slurp(log));
}

// A progress file that is not ended, naming a pid that now belongs to a
// process started after the file was written: the pid was reused, and the
// process that recorded is gone. A fresh file of the same running process
// is a process recording.
BOOST_AUTO_TEST_CASE(ctl_tells_a_reused_pid_from_a_recording_process) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(run(run_argv(run_dir, {}, {kChild, "exit", "0"}), log, 60) == 0, slurp(log));
  const std::string model = only_progress_file(run_dir);
  BOOST_TEST_REQUIRE(!model.empty());
  const std::string live = write_live_progress(run_dir, model, static_cast<int>(::getpid()));
  // Written in 2001: long before this test process started.
  const timespec old[2] = {{978307200, 0}, {978307200, 0}};
  BOOST_TEST_REQUIRE(::utimensat(AT_FDCWD, live.c_str(), old, 0) == 0);
  BOOST_TEST(run({kCli, "ctl", run_dir, "off"}, log, 20) == 1, slurp(log));
  BOOST_TEST(has(slurp(log), "is recording"), slurp(log));
  BOOST_TEST(!exists(run_dir + "/control"));
  // Written now, by a running process (this one): switched.
  BOOST_TEST_REQUIRE(::utimensat(AT_FDCWD, live.c_str(), nullptr, 0) == 0);
  BOOST_TEST(run({kCli, "ctl", run_dir, "off"}, log, 20) == 0, slurp(log));
  BOOST_TEST(slurp(run_dir + "/control") == "off\n");
}

BOOST_AUTO_TEST_CASE(set_values_past_the_kernels_limit_on_one_string_are_refused_before_start) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const std::string done = t.path() + "/done";
  // 140 valid settings of about 1 KiB each: over 128 KiB joined.
  const std::string dir(1000, 'd');
  std::vector<std::string> sets;
  for (int i = 0; i < 140; ++i)
    sets.insert(sets.end(),
                {"--set", "dataloader[" + dir + "/t" + std::to_string(i) + ".py:1].num_workers=1"});
  const int rc = run(run_argv(run_dir, sets, {kChild, "steps", "1", "1", done}), log, 60);
  const std::string text = slurp(log);
  BOOST_TEST(rc == 2, text);
  BOOST_TEST(has(text, "STALLSCOPE_SET"), text);
  BOOST_TEST(has(text, std::to_string(32 * ::sysconf(_SC_PAGESIZE))), text);
  BOOST_TEST(has(text, "MAX_ARG_STRLEN"), text);
  BOOST_TEST(!has(text, "Argument list too long"), text);
  BOOST_TEST(!exists(done));     // the program never started
  BOOST_TEST(!exists(run_dir));  // nor was a run directory made for it
}

// A DataLoader constructed in a script whose path holds ';' (which ends an
// item of STALLSCOPE_SET): every suggested `try:` line, its --set items read
// back as `tune` reads them, is taken by `stallscope run` as it is.
BOOST_AUTO_TEST_CASE(every_suggested_try_line_is_accepted_by_run) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "/tmp/exp;1/train;v2.py"};
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, 7, 1, "/tmp/exp;1/train;v2.py:42");
  // One worker fetches each batch in 20 ms, the trainer computes 10 ms:
  // more workers, on idle CPUs (as test_dataloader's one_worker).
  for (int i = 0; i < 12; ++i) {
    const double f = 20.0 * i;
    for (int k = 0; k < 8; ++k) b.sample(w, f + 2 * k, f + 2 * k + 2, SamplePart::kGetItem, i);
    b.sample(w, f + 16, f + 19, SamplePart::kCollate, i, 0, 0, 8);
    b.sample(w, f, f + 20, SamplePart::kFetch, i, 0, 0, 8);
    const double start = i == 0 ? 0 : f + 10.1;
    b.step(i, start, f + 30.1).wait(start, f + 20.1, i).kernel(f + 20.1, f + 30.1);
    b.handoff(start, f + 20.1, 7, i, 201);
  }
  b.t.procs[0].affinity_cpus = 2;
  for (double at = 0; at <= 280; at += 5) b.counter("cpu.idle", at, 0.9);
  const auto r = b.analyze();
  TempDir t;
  size_t checked = 0;
  for (const auto& m : r.remedies) {
    const std::string cmd = stallscope::analyzer::try_command(m.settings, r.command);
    if (!has(cmd, "dataloader")) continue;
    BOOST_TEST_CONTEXT(cmd) {
      std::vector<std::string> items;
      for (const auto& s : m.settings) items.push_back(stallscope::analyzer::setting_item(s));
      BOOST_TEST_REQUIRE(!items.empty());
      std::vector<std::string> sets;
      std::string joined;
      for (const auto& i : items) {
        sets.insert(sets.end(), {"--set", i});
        joined += (joined.empty() ? "" : ";") + i;
      }
      const std::string log = t.path() + "/log" + std::to_string(checked);
      const std::string out = t.path() + "/run" + std::to_string(checked++);
      BOOST_TEST(run(run_argv(out, sets, {"/usr/bin/env"}), log, 30) == 0, slurp(log));
      BOOST_TEST(!has(slurp(log), "not applied"), slurp(log));
      BOOST_TEST(has(slurp(log), "\nSTALLSCOPE_SET=" + joined + "\n"), slurp(log));
    }
  }
  BOOST_TEST(checked > 0u, "no remedy suggested a DataLoader setting");
}

// Python's resource tracker outlives the trainer under `spawn`; here a
// forked child keeps its trace open 0.5 s after the command exits.
BOOST_AUTO_TEST_CASE(a_file_completed_soon_after_the_command_exits_is_not_reported_cut) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(run(run_argv(run_dir, {"--quiet"}, {kLinger, "500"}), log, 60) == 0,
                     slurp(log));
  const std::string report = slurp(run_dir + "/report.txt");
  BOOST_TEST_REQUIRE(!report.empty(), slurp(log));
  BOOST_TEST(!has(report, "no End chunk"), report);
  BOOST_TEST(!has(report, "truncated"), report);
  BOOST_TEST(has(report, "files cut 0"), report);
}

// One that stays open past the wait (2 s): still being written, not cut.
BOOST_AUTO_TEST_CASE(a_file_still_open_after_the_wait_is_said_to_be_still_being_written) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(run(run_argv(run_dir, {"--quiet"}, {kLinger, "5000"}), log, 60) == 0,
                     slurp(log));
  const std::string report = slurp(run_dir + "/report.txt");
  BOOST_TEST_REQUIRE(!report.empty(), slurp(log));
  BOOST_TEST(has(report, ": still being written (process "), report);
  BOOST_TEST(!has(report, "no End chunk"), report);
  BOOST_TEST(!has(report, "truncated"), report);
  // The child ends on its own before the directory is removed.
  BOOST_TEST(eventually([&] { return progress_sum(run_dir, "ended") == 2u; }, 30));
}

BOOST_AUTO_TEST_SUITE_END()
