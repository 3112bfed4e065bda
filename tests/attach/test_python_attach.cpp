// Python trainers under `stallscope run` with Debian's /usr/bin/python3: a
// pure-Python trainer with multiprocessing (fork) workers, and a real
// PyTorch DataLoader(num_workers=2) CPU training loop whose
// Dataset.__getitem__ is deliberately slow in CPU work. The report must
// name preprocessing, which holds when the workers get the CPU they ask for:
// those two cases have ctest entries of their own and skip, visibly, where
// other processes keep the CPUs busy (tests/cpu_premise.hpp). (The
// slow-read variant is test_torch_storage.)
#include <zlib.h>

#include <fstream>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"
#include "cpu_premise.hpp"

using namespace attach;

namespace {

const std::string kRun = STALLSCOPE_BIN;
const std::string kPython = "/usr/bin/python3";
const std::string kSrc = ATTACH_SOURCE_DIR;
// A Python expression: true when stallscope's import finder is installed.
const std::string kHooked =
    "any(type(f).__name__ == 'StallscopeAfterImport' for f in sys.meta_path)";

void write_compressed_files(const std::string& dir, int n) {
  std::filesystem::create_directories(dir);
  for (int i = 0; i < n; ++i) {
    std::string raw(64 * 1024, char('a' + i % 26));
    uLongf len = compressBound(raw.size());
    std::string out(len, '\0');
    compress(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(raw.data()),
             raw.size());
    std::ofstream(dir + "/f" + std::to_string(i) + ".z", std::ios::binary)
        .write(out.data(), static_cast<std::streamsize>(len));
  }
}

double share(const nlohmann::json& rank, const char* part) {
  return rank["parts"][part]["share"].get<double>();
}

// Preprocessing >= 40 % of the step and more than storage (and, with
// `named`, the report's cause). Where the workers wait for a CPU other
// processes hold, that wait is no preprocessing the trace can see: then the
// case skips instead.
void check_names_preprocessing(const nlohmann::json& rank, const std::string& run_dir, bool named) {
  const double pre = share(rank, "data.preprocess"), storage = share(rank, "data.storage");
  const std::string cause = rank["cause"].get<std::string>();
  const bool in_cause = cause.find("preprocessing") != std::string::npos;
  if (pre < 0.4 || pre <= storage || (named && !in_cause))
    if (const std::string busy = stallscope::test::cpus_busy(2); !busy.empty())
      stallscope::test::skip_case("preprocessing " + std::to_string(int(pre * 100)) +
                                  " % of the step (" + cause +
                                  "), as the premise does not hold: " + busy);
  BOOST_TEST(pre >= 0.4, slurp(run_dir + "/report.txt"));
  BOOST_TEST(pre > storage);
  if (named) BOOST_TEST(in_cause, cause);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(python_attach)

BOOST_AUTO_TEST_CASE(multiprocessing_trainer_with_the_module_names_preprocessing,
                     *boost::unit_test::disabled()) {  // an entry of its own (CMakeLists.txt)
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  write_compressed_files(t.path() + "/data", 8);
  // A sitecustomize of the user's own: stallscope's must chain to it.
  std::filesystem::create_directories(t.path() + "/site");
  std::ofstream(t.path() + "/site/sitecustomize.py")
      << "open('" << t.path() << "/user-site-ran', 'w').write('yes')\n";
  const int code = run({kRun, "run", "--out", run_dir, "--", kPython, kSrc + "/mp_trainer.py",
                        t.path() + "/data", "40"},
                       log, 60, {"PYTHONPATH=" + t.path() + "/site"});
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  BOOST_TEST(slurp(t.path() + "/user-site-ran") == "yes");
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
  const auto& r = rep["ranks"][0];
  BOOST_TEST(r["step_source"]["kind"].get<std::string>() == "step_events");
  BOOST_TEST(r["steps"]["total"].get<int>() >= 39);
  check_names_preprocessing(r, run_dir, false);
  BOOST_TEST(r["files"].size() >= 3u, slurp(run_dir + "/report.txt"));  // one per worker
}

BOOST_AUTO_TEST_CASE(pytorch_dataloader_slow_getitem_cpu_names_preprocessing,
                     *boost::unit_test::disabled()) {  // an entry of its own (CMakeLists.txt)
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const int code = run({kRun, "run", "--out", run_dir, "--start-step", "3", "--steps", "20", "--",
                        kPython, kSrc + "/torch_trainer.py", "cpu", t.path(), "40"},
                       log, 90);
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  BOOST_TEST(slurp(log).find("with the Python hooks") != std::string::npos);
  BOOST_TEST(slurp(log).find("trained 40 steps") != std::string::npos, slurp(log));
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
  const auto& r = rep["ranks"][0];
  // Steps from the optimizer hook, data waits from DataLoader.__next__.
  BOOST_TEST(r["step_source"]["kind"].get<std::string>() == "step_events");
  BOOST_TEST(r["steps"]["total"].get<int>() >= 20);
  BOOST_TEST(r["steps"]["total"].get<int>() < 40);  // the window closed early
  // Two worker processes next to the trainer (they tag themselves).
  BOOST_TEST(r["files"].size() >= 3u);
  check_names_preprocessing(r, run_dir, true);
  // Each worker process named its track after its worker id.
  const std::string info = t.path() + "/info";
  BOOST_TEST(run({kRun, "info", run_dir}, info, 30) == 0);
  BOOST_TEST(slurp(info).find("\"DataLoader worker 0\"") != std::string::npos, slurp(info));
  BOOST_TEST(slurp(info).find("\"DataLoader worker 1\"") != std::string::npos, slurp(info));
}

BOOST_AUTO_TEST_CASE(hooks_do_not_import_torch_eagerly) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const int code = run({kRun, "run", "--out", t.path() + "/run", "--", kPython, "-c",
                        "import sys; sys.exit(4 if 'torch' in sys.modules else "
                        "0 if " + kHooked + " else 5)"},
                       log, 30);
  BOOST_TEST(code == 0, slurp(log));  // hooks installed (finder present), torch not imported
}

// Start-up under the hooks loads no module a program without them would not
// have: the finder waits for torch, and stallscope's own modules come with it.
BOOST_AUTO_TEST_CASE(hooks_load_no_module_before_torch) {
  TempDir t;
  const std::string code =
      "import sys; open(sys.argv[1], 'w').write(' '.join(sorted(sys.modules)))";
  const std::string plain = t.path() + "/plain", hooked = t.path() + "/hooked";
  BOOST_TEST_REQUIRE(run({kPython, "-c", code, plain}, t.path() + "/log1", 30) == 0);
  BOOST_TEST_REQUIRE(run({kRun, "run", "--out", t.path() + "/run", "--", kPython, "-c",
                          code + "; sys.exit(0 if " + kHooked + " else 5)", hooked},
                         t.path() + "/log2", 30) == 0,
                     slurp(t.path() + "/log2"));
  BOOST_TEST(slurp(hooked) == slurp(plain));
}

// The recorder's SIGINT/SIGTERM handlers are invisible to Python: it
// installs its KeyboardInterrupt handler as without stallscope (the
// forkserver restores the handlers it read; "None" would fail it).
BOOST_AUTO_TEST_CASE(python_keeps_its_own_signal_handlers) {
  TempDir t;
  const std::string code =
      "import os, signal, sys, time\n"
      "if signal.getsignal(signal.SIGINT) is not signal.default_int_handler: sys.exit(5)\n"
      "if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL: sys.exit(6)\n"
      "try:\n"
      "    os.kill(os.getpid(), signal.SIGINT)\n"
      "    time.sleep(10)\n"
      "except KeyboardInterrupt:\n"
      "    sys.exit(0)\n"
      "sys.exit(7)\n";
  const std::string log = t.path() + "/log";
  BOOST_TEST(run({kRun, "run", "--out", t.path() + "/run", "--", kPython, "-c", code}, log, 30) ==
                 0,
             slurp(log));
}

// DataLoader workers started by each method: spawn and forkserver pickle the
// worker target by reference, so every hook must be picklable and look like
// what it wraps. The trainer checks that and its batches; each run's report
// has the optimizer's steps and both workers' named tracks.
BOOST_AUTO_TEST_CASE(hooks_work_under_fork_spawn_and_forkserver_workers) {
  for (const std::string method : {"fork", "spawn", "forkserver"}) {
    BOOST_TEST_CONTEXT("start method " << method) {
      TempDir t;
      const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
      const int code = run({kRun, "run", "--out", run_dir, "--", kPython,
                            kSrc + "/torch_contexts.py", method, "12"},
                           log, 90);
      BOOST_TEST_REQUIRE(code == 0, slurp(log));
      BOOST_TEST(slurp(log).find("trained 12 steps with " + method) != std::string::npos,
                 slurp(log));
      const auto rep = report_json(run_dir);
      BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
      const auto& r = rep["ranks"][0];
      BOOST_TEST(r["step_source"]["kind"].get<std::string>() == "step_events");
      BOOST_TEST(r["steps"]["total"].get<int>() >= 11);
      const std::string info = t.path() + "/info";
      BOOST_TEST(run({kRun, "info", run_dir}, info, 30) == 0);
      BOOST_TEST(slurp(info).find("\"DataLoader worker 0\"") != std::string::npos, slurp(info));
      BOOST_TEST(slurp(info).find("\"DataLoader worker 1\"") != std::string::npos, slurp(info));
    }
  }
}

BOOST_AUTO_TEST_CASE(hooks_reach_a_script_started_through_its_shebang) {
  TempDir t;
  const std::string log = t.path() + "/log", script = t.path() + "/train.py";
  std::ofstream(script) << "#!/usr/bin/env python3\nimport sys\n"
                           "sys.exit(0 if " << kHooked << " else 6)\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  BOOST_TEST(run({kRun, "run", "--out", t.path() + "/run", "--", script}, log, 30) == 0,
             slurp(log));
}

BOOST_AUTO_TEST_CASE(module_uses_stallscope_lib_and_is_a_no_op_without_a_library) {
  TempDir t;
  const std::string code =
      "import stallscope, time\n"
      "for i in range(6):\n"
      "    stallscope.step()\n"
      "    with stallscope.data_wait(i): time.sleep(0.005)\n"
      "    with stallscope.range('train'): time.sleep(0.002)\n"
      "stallscope.step_end()\n";
  const std::string path = "PYTHONPATH=" + kSrc + "/../../integrations/python";
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  BOOST_TEST_REQUIRE(run({kPython, "-c", code}, log, 30,
                         {path, std::string("STALLSCOPE_LIB=") + ATTACH_TRACE_LIB,
                          "STALLSCOPE_OUT=" + run_dir}) == 0,
                     slurp(log));
  const std::string json = t.path() + "/report.json";
  BOOST_TEST_REQUIRE(run({kRun, "report", "--json", run_dir}, json, 30) == 0, slurp(json));
  const auto rep = nlohmann::json::parse(slurp(json), nullptr, false);
  BOOST_TEST_REQUIRE(rep.is_object());
  BOOST_TEST(rep["ranks"][0]["steps"]["total"].get<int>() == 6);
  // No library anywhere: the same program runs, with one warning.
  const std::string log2 = t.path() + "/log2";
  BOOST_TEST(run({kPython, "-c", code}, log2, 30, {path, "STALLSCOPE_LIB=/nonexistent.so"}) == 0);
  const std::string out = slurp(log2);
  BOOST_TEST(out.find("stallscope marks are no-ops") != std::string::npos, out);
  BOOST_TEST(out.find("no-ops") == out.rfind("no-ops"));  // once
}

BOOST_AUTO_TEST_CASE(no_python_hooks_leaves_pythonpath_alone) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  const int code = run({kRun, "run", "--out", run_dir, "--no-python-hooks", "--", kPython, "-c",
                        "import os, sys; sys.exit(0 if 'stallscope' not in "
                        "os.environ.get('PYTHONPATH', '') else 5)"},
                       log, 30);
  BOOST_TEST(code == 0, slurp(log));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// The stack samples of a run's Chrome export: (pid, frames, interval s).
struct StackSample {
  int64_t pid;
  std::vector<std::string> frames;
  double interval_s;
};

std::vector<StackSample> stack_samples(const std::string& run_dir, const std::string& tmp) {
  const std::string chrome = tmp + "/trace.json", log = tmp + "/export.log";
  std::vector<StackSample> out;
  if (run({kRun, "export", "--chrome", chrome, run_dir}, log, 60) != 0) return out;
  const auto doc = nlohmann::json::parse(slurp(chrome), nullptr, false);
  for (const auto& e : doc.is_object() ? doc["traceEvents"] : doc) {
    if (e.value("cat", "") != "stack_sample") continue;
    out.push_back({e["pid"].get<int64_t>(), e["args"]["frames"].get<std::vector<std::string>>(),
                   e["args"]["interval_ns"].get<double>() * 1e-9});
  }
  return out;
}

}  // namespace

// The main thread spins 1.5 s (called through a frame of "torch/_dynamo"),
// then a forked child spins 0.75 s: their samples name the function, weigh
// about the time spent (each sample carries its real interval), skip the
// torch.compile frame, and the child samples too.
BOOST_AUTO_TEST_CASE(the_python_stack_sampler_weighs_what_each_thread_ran) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run",
                    facts = t.path() + "/facts.json";
  BOOST_TEST_REQUIRE(run({kRun, "run", "--out", run_dir, "--", kPython,
                          kSrc + "/stack_sampler.py", facts, "1.5"},
                         log, 90, {"STALLSCOPE_PY_STACKS_HZ=50"}) == 0,
                     slurp(log));
  const auto f = nlohmann::json::parse(slurp(facts));
  double parent = 0, child = 0;
  int parent_n = 0, child_n = 0;
  for (const auto& s : stack_samples(run_dir, t.path())) {
    for (const auto& fr : s.frames) BOOST_TEST(fr.find("_dynamo") == std::string::npos, fr);
    if (s.frames.empty()) continue;
    if (s.pid == f["pid"] && s.frames[0].rfind("busy_in_here ", 0) == 0) {
      parent += s.interval_s, ++parent_n;
      BOOST_TEST_REQUIRE(s.frames.size() >= 2u);
      BOOST_TEST(s.frames[1].rfind("main ", 0) == 0, s.frames[1]);  // folded
    }
    if (s.pid == f["child"] && s.frames.size() >= 2 && s.frames[1].rfind("child_spins ", 0) == 0)
      child += s.interval_s, ++child_n;
  }
  const double busy = f["busy_s"].get<double>();
  BOOST_TEST(parent_n >= 5);
  BOOST_TEST(parent >= 0.6 * busy);
  BOOST_TEST(parent <= 1.4 * busy);
  BOOST_TEST(child_n >= 2);
  BOOST_TEST(child >= 0.3 * busy / 2);
  BOOST_TEST(child <= 1.7 * busy / 2);
}

BOOST_AUTO_TEST_CASE(the_stack_sampler_is_off_at_zero_and_names_a_bad_rate) {
  TempDir t;
  const std::string log = t.path() + "/log", facts = t.path() + "/facts.json";
  BOOST_TEST_REQUIRE(run({kRun, "run", "--out", t.path() + "/off", "--", kPython,
                          kSrc + "/stack_sampler.py", facts, "0.3"},
                         log, 90, {"STALLSCOPE_PY_STACKS_HZ=0"}) == 0,
                     slurp(log));
  BOOST_TEST(stack_samples(t.path() + "/off", t.path()).empty());
  const std::string log2 = t.path() + "/log2";
  BOOST_TEST_REQUIRE(run({kRun, "run", "--out", t.path() + "/bad", "--", kPython,
                          kSrc + "/stack_sampler.py", facts, "0.3"},
                         log2, 90, {"STALLSCOPE_PY_STACKS_HZ=fast"}) == 0,
                     slurp(log2));
  BOOST_TEST(slurp(log2).find("STALLSCOPE_PY_STACKS_HZ='fast' is not a rate in [0, 250]; "
                              "using 25") != std::string::npos,
             slurp(log2));
  BOOST_TEST(!stack_samples(t.path() + "/bad", t.path()).empty());
}
