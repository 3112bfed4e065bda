// The PyTorch DataLoader seen from inside: real torch (Debian's
// python3-torch, CPU) under `stallscope run`, a trainer written as users
// write one (tests/attach/torch_loader.py), which writes down what it did.
// tests/attach/check_loader_trace.py holds the Chrome export of the run
// against that: every iterator's configuration and construction site, each
// batch's hand-off from a known worker, the workers' fetches, sample and
// collate spans, the num_workers=0 spans on the trainer, evaluation loops
// as phases and one step per optimizer step. Then `--set` settings (through
// STALLSCOPE_SET, what `stallscope run --set` passes): applied, fixed or
// refused, each said on stderr and in the trace.
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"

using namespace attach;

namespace {

const std::string kRun = STALLSCOPE_BIN;
const std::string kPython = "/usr/bin/python3";
const std::string kSrc = ATTACH_SOURCE_DIR;

struct LoaderRun {
  TempDir t;
  std::string log = t.path() + "/log";
  std::string run_dir = t.path() + "/run";
  std::string expected = t.path() + "/expected.json";
  std::string chrome = t.path() + "/trace.json";
  int code = -1;

  LoaderRun(const std::string& method, const std::vector<std::string>& flags,
            const std::vector<std::string>& env = {},
            const std::vector<std::string>& run_flags = {}) {
    std::vector<std::string> argv = {kRun, "run", "--out", run_dir};
    argv.insert(argv.end(), run_flags.begin(), run_flags.end());
    for (const std::string a : {std::string("--"), kPython, kSrc + "/torch_loader.py", method,
                                expected})
      argv.push_back(a);
    argv.insert(argv.end(), flags.begin(), flags.end());
    code = run(argv, log, 110, env);
  }
  std::string output() const { return slurp(log); }
  // The checker's verdict: "" when the trace matches, else its mismatches.
  std::string mismatches() {
    const std::string out = t.path() + "/export";
    if (run({kRun, "export", "--chrome", chrome, run_dir}, out, 60) != 0)
      return "export failed: " + slurp(out);
    const std::string check = t.path() + "/check";
    if (run({kPython, kSrc + "/check_loader_trace.py", chrome, expected}, check, 60) == 0)
      return "";
    return slurp(check);
  }
  nlohmann::json chrome_events() const {
    const auto doc = nlohmann::json::parse(slurp(chrome), nullptr, false);
    return doc.is_object() ? doc["traceEvents"] : doc;
  }
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The line of torch_loader.py where the train loader is built.
int train_line() {
  std::istringstream in(slurp(kSrc + "/torch_loader.py"));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.rfind("    train = DataLoader(", 0) == 0) return n;
  return 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_dataloader_is_recorded_from_inside_under_each_start_method) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"fork", {}},
      {"spawn", {"--persistent"}},
      {"forkserver", {"--iterable"}},
      {"fork", {"--iterable", "--persistent", "--epochs", "3"}},
  };
  for (const auto& [method, flags] : runs) {
    std::string name = method;
    for (const auto& f : flags) name += " " + f;
    BOOST_TEST_CONTEXT(name) {
      LoaderRun r(method, flags);
      BOOST_TEST_REQUIRE(r.code == 0, r.output());
      BOOST_TEST(contains(r.output(), "with " + method), r.output());
      BOOST_TEST(r.mismatches() == "");
    }
  }
}

// Two loaders zipped into each step, a sanity-check loader built first and
// run under no_grad, a dataset with __getitems__, and a GradScaler that
// skips every third optimizer step: still one step per iteration.
BOOST_AUTO_TEST_CASE(zipped_loaders_a_sanity_check_getitems_and_skipped_scaler_steps) {
  LoaderRun r("fork", {"--zip", "--sanity", "--getitems", "--scaler-skips"});
  BOOST_TEST_REQUIRE(r.code == 0, r.output());
  BOOST_TEST(r.mismatches() == "");
}

BOOST_AUTO_TEST_CASE(num_workers_zero_loads_on_the_trainer_thread) {
  LoaderRun r("fork", {"--workers", "0", "--epochs", "1"});
  BOOST_TEST_REQUIRE(r.code == 0, r.output());
  BOOST_TEST(r.mismatches() == "");
}

// Settings select loaders by construction order, site and dataset class;
// each is said on stderr and recorded as a mark; the loader's recorded
// configuration carries the applied values and the overridden flag; bad
// ones are named and the program runs untouched by them.
BOOST_AUTO_TEST_CASE(settings_take_effect_and_bad_ones_are_named) {
  const std::string site = "torch_loader.py:" + std::to_string(train_line());
  BOOST_TEST_REQUIRE(site != "torch_loader.py:0");
  const std::string set =
      "STALLSCOPE_SET=dataloader[0].num_workers=1;dataloader[" + site + "].pin_memory=yes;"
      "dataloader[Slow].prefetch_factor=3;dataloader.num_workers=-3;dataloader.bogus=1;"
      "dataloader[Nope].persistent_workers=true;loader.workers=4";
  LoaderRun r("fork", {"--print-config", "--epochs", "1"}, {set});
  BOOST_TEST_REQUIRE(r.code == 0, r.output());
  const std::string out = r.output();
  BOOST_TEST(contains(out, "trained 8 steps"), out);
  // [0] is the train loader, built first.
  BOOST_TEST(contains(out, "config num_workers=1 prefetch_factor=3 persistent_workers=False "
                           "pin_memory=True"),
             out);
  BOOST_TEST(contains(out, "set applied dataloader[0].num_workers=1 at "), out);
  BOOST_TEST(contains(out, site + " (was 2)"), out);
  BOOST_TEST(contains(out, "set refused dataloader.num_workers=-3: '-3' is not an integer"), out);
  BOOST_TEST(contains(out, "set refused dataloader.bogus=1: unknown field 'bogus'"), out);
  BOOST_TEST(contains(out, "set unmatched dataloader[Nope].persistent_workers=true"), out);
  // The validation loader (Slow, no workers) cannot take a prefetch_factor.
  BOOST_TEST(contains(out, "set refused dataloader[Slow].prefetch_factor=3 at "), out);
  BOOST_TEST(contains(out, "prefetch_factor needs num_workers > 0"), out);
  BOOST_TEST(!contains(out, "loader.workers"), out);  // not for the DataLoader hooks
  BOOST_TEST(!contains(out, "Traceback"), out);

  BOOST_TEST_REQUIRE(r.mismatches() == "");
  int marks = 0, train_configs = 0;
  for (const auto& e : r.chrome_events()) {
    const std::string name = e.value("name", "");
    if (name.rfind("set ", 0) == 0) ++marks;
    if (e.value("cat", "") == "loader_config" && e["args"]["num_workers"] == 1) {
      ++train_configs;
      BOOST_TEST(e["args"].value("overridden", false));
      BOOST_TEST(e["args"]["prefetch_factor"] == 3);
      BOOST_TEST(e["args"]["pin_memory"] == "inactive");  // asked for; no CUDA here
    }
  }
  BOOST_TEST(train_configs == 1);
  BOOST_TEST(marks == 7);  // 3 applied, 3 refused, 1 unmatched
}

// num_workers=0 on a loader built with workers, a prefetch_factor, a start
// method and persistent workers: the constructor would refuse the last three,
// so they are put to what it takes, each said.
BOOST_AUTO_TEST_CASE(dependent_arguments_are_fixed_so_the_constructor_never_raises) {
  LoaderRun r("spawn", {"--persistent", "--prefetch", "4", "--epochs", "1", "--print-config"},
              {"STALLSCOPE_SET=dataloader[0].num_workers=0"});
  BOOST_TEST_REQUIRE(r.code == 0, r.output());
  const std::string out = r.output();
  BOOST_TEST(contains(out, "config num_workers=0 prefetch_factor=2 persistent_workers=False"),
             out);
  BOOST_TEST(contains(out, "set adjusted dataloader.prefetch_factor=2 at "), out);
  BOOST_TEST(contains(out, "set adjusted dataloader.persistent_workers=false at "), out);
  BOOST_TEST(contains(out, "set adjusted dataloader.multiprocessing_context=none at "), out);
  BOOST_TEST(r.mismatches() == "");
}

// The same through `stallscope run --set`: the CLI names a bad key and
// leaves it out; the hooks apply the rest; the report lists what was tried.
BOOST_AUTO_TEST_CASE(stallscope_run_set_reaches_the_dataloader) {
  const std::string site = "torch_loader.py:" + std::to_string(train_line());
  LoaderRun r("fork", {"--print-config", "--epochs", "1"}, {},
              {"--set", "dataloader[" + site + "].num_workers=1", "--set",
               "dataloader.num_wrokers=3", "--set", "dataloader[0].persistent_workers=on"});
  BOOST_TEST_REQUIRE(r.code == 0, r.output());
  const std::string out = r.output();
  BOOST_TEST(contains(out, "config num_workers=1 prefetch_factor=2 persistent_workers=True"), out);
  BOOST_TEST(contains(out, "unknown field 'num_wrokers'"), out);
  BOOST_TEST(contains(out, "set applied dataloader[" + site + "].num_workers=1 at "), out);
  BOOST_TEST(contains(out, "set applied dataloader[0].persistent_workers=true at "), out);
  BOOST_TEST(r.mismatches() == "");
}
