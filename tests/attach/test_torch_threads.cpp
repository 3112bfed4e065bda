// The threads guard rail of more workers (docs/remedies.md "Guard rails")
// against real thread pools: Debian's torch 1.13 (CPU), a trainer whose
// DataLoader worker runs an intra-op pool (tests/attach/torch_threads.py:
// torch.set_num_threads(4) in worker_init_fn, or a decode thread pool the
// dataset starts from its 4th batch on). The trainer is input bound on CPU
// decode, so more workers are considered. The hooks' thread counts must
// match what the worker saw in /proc/self/task, and the report must limit
// the workers to budget / pool or reject them naming the pool and its fix;
// with one thread per worker the rail must stay out of the way.
//
// Each case is a ctest entry of its own and skips (77) where torch is not
// importable, or where more workers were not considered while other
// processes kept the CPUs busy (tests/cpu_premise.hpp).
#include <cmath>
#include <filesystem>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"
#include "cpu_premise.hpp"

using namespace attach;
using stallscope::test::skip_case;

namespace {

const std::string kRun = STALLSCOPE_BIN;
const std::string kPython = "/usr/bin/python3";
const std::string kSrc = ATTACH_SOURCE_DIR;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// What the worker saw of its threads (torch_threads.py's worker-PID.json).
struct Truth {
  int workers = 0;
  double most_threads = -1, torch_threads = -1;
};

struct ThreadsRun {
  TempDir t;
  std::string log = t.path() + "/log", run_dir = t.path() + "/run", truth_dir = t.path() + "/truth";
  int code = -1;
  nlohmann::json rank;

  explicit ThreadsRun(const std::vector<std::string>& flags) {
    if (run({kPython, "-c", "import torch"}, log, 60) != 0)
      skip_case(kPython + " cannot import torch: " + slurp(log));
    const std::string data = t.path() + "/data";
    BOOST_TEST_REQUIRE(run({kPython, kSrc + "/torch_threads.py", "--make-data", data}, log, 60) == 0,
                       slurp(log));
    std::vector<std::string> argv = {kRun, "run", "--out", run_dir, "--", kPython,
                                     kSrc + "/torch_threads.py", data, truth_dir};
    argv.insert(argv.end(), flags.begin(), flags.end());
    code = run(argv, log, 150);
    BOOST_TEST_REQUIRE(code == 0, slurp(log));
    const nlohmann::json doc = report_json(run_dir);
    BOOST_TEST_REQUIRE(doc.is_object(), slurp(log));
    rank = doc["ranks"][0];
  }
  std::string report() const { return slurp(run_dir + "/report.txt"); }

  Truth truth() const {
    Truth w;
    for (const auto& e : std::filesystem::directory_iterator(truth_dir)) {
      if (e.path().extension() != ".json") continue;
      const auto j = nlohmann::json::parse(slurp(e.path()), nullptr, false);
      if (!j.is_object()) continue;
      ++w.workers;
      w.most_threads = std::max(w.most_threads, j["most_threads"].get<double>());
      w.torch_threads = std::max(w.torch_threads, j["torch_threads"].get<double>());
    }
    return w;
  }
  const nlohmann::json& guard() const { return rank["dataloaders"][0]["guard_rails"]; }
  const nlohmann::json* remedy(const std::string& id) const {
    for (const auto& m : rank["remedies"])
      if (m["id"] == id) return &m;
    return nullptr;
  }
  std::string rejected(const std::string& id) const {
    for (const auto& x : rank["rejected_remedies"])
      if (x["id"] == id) return x["reason"].get<std::string>();
    return "";
  }
  double budget() const { return rank["cpu"]["budget_cores"].get<double>(); }
};

// A remedy's input by name (its "inputs" object), -1 when absent.
double input(const nlohmann::json& m, const std::string& name) {
  const auto& in = m["inputs"];
  return in.contains(name) ? in[name]["value"].get<double>() : -1;
}

// More workers considered: proposed, or rejected by the threads rail.
// Where neither holds while other processes keep the CPUs busy, the
// premise (an input-bound trainer with a core to spare) did not: skip.
void require_considered(const ThreadsRun& r, bool rail) {
  const std::string why = r.rejected("more_workers");
  const bool considered = r.remedy("more_workers") != nullptr ||
                          (rail && contains(why, "each worker runs a pool of"));
  if (!considered)
    if (const std::string busy = stallscope::test::cpus_busy(2); !busy.empty())
      skip_case("more_workers not considered (" + (why.empty() ? r.rank.value("cause", "") : why) +
                "), as the premise does not hold: " + busy);
  BOOST_TEST_REQUIRE(considered, "more_workers: " + why + "\n" + r.report());
}

// The pool's rail on the report: W at most floor(budget / pool), or more
// workers rejected with the pool, its threads and the fix.
void check_rail(const ThreadsRun& r, int pool, double threads, const std::string& fix) {
  const int most = int(std::floor(r.budget() / pool));
  const std::string said = "each worker runs a pool of " + std::to_string(pool) + " threads (" +
                           std::to_string(int(threads)) + " threads in all";
  if (const nlohmann::json* m = r.remedy("more_workers")) {
    const std::string ev = (*m)["evidence"].get<std::string>();
    BOOST_TEST(most > 1);  // the first worker is there already
    BOOST_TEST(input(*m, "suggested_workers") <= most, ev);
    if (input(*m, "workers_needed") > most) BOOST_TEST(contains(ev, said), ev);
    return;
  }
  const std::string why = r.rejected("more_workers");
  BOOST_TEST(most <= 1, why);  // 1 worker now: rejected only when no second fits
  BOOST_TEST(contains(why, said), why);
  BOOST_TEST(contains(why, "fix: " + fix), why);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(torch_threads)

// worker_init_fn: torch.set_num_threads(4). The worker shows 9 threads
// (its main one, its queue's feeder and resource sharer, OpenMP's team of
// 4 less the main one, and the 3 idle threads of torch's pthreadpool): a
// pool of 4. On 2 cores no second worker fits.
BOOST_AUTO_TEST_CASE(a_torch_pool_in_the_worker_limits_more_workers,
                     *boost::unit_test::disabled()) {  // an entry of its own (CMakeLists.txt)
  ThreadsRun r({"--pool", "4"});
  const Truth w = r.truth();
  BOOST_TEST_REQUIRE(w.workers == 1);
  BOOST_TEST(w.torch_threads == 4);
  BOOST_TEST(w.most_threads >= 6, "the worker's pool never started");
  BOOST_TEST(r.guard()["worker_torch_threads"] == 4);
  BOOST_TEST(r.guard()["worker_threads"] == w.most_threads, r.guard().dump());
  require_considered(r, true);
  check_rail(r, 4, w.most_threads,
             "one thread per worker: torch.set_num_threads(1) (and cv2.setNumThreads(0)) in "
             "worker_init_fn");
}

// The control: torch.set_num_threads(1) there (what torch's worker loop
// sets already). 3 threads (main, feeder, resource sharer): no pool, the
// idle core goes to a second worker.
BOOST_AUTO_TEST_CASE(one_thread_per_worker_leaves_the_rail_out,
                     *boost::unit_test::disabled()) {
  ThreadsRun r({"--pool", "1"});
  const Truth w = r.truth();
  BOOST_TEST_REQUIRE(w.workers == 1);
  BOOST_TEST(w.torch_threads == 1);
  BOOST_TEST(r.guard()["worker_torch_threads"] == 1);
  BOOST_TEST(r.guard()["worker_threads"] == w.most_threads, r.guard().dump());
  require_considered(r, false);
  const nlohmann::json* m = r.remedy("more_workers");
  BOOST_REQUIRE(m != nullptr);
  const std::string ev = (*m)["evidence"].get<std::string>();
  BOOST_TEST(input(*m, "suggested_workers") >= 2, ev);
  BOOST_TEST(!contains(ev, "pool of"), ev);
  BOOST_TEST(contains((*m)["pytorch_knob"].get<std::string>(), "DataLoader(num_workers="));
}

// A pool the dataset starts from its 4th batch on (4 decode threads; zlib
// releases the GIL), after the hooks' first count: the later counts see it.
// torch is at 1 there, so the fix names the other libraries.
BOOST_AUTO_TEST_CASE(a_pool_started_after_the_first_batch_is_counted,
                     *boost::unit_test::disabled()) {
  ThreadsRun r({"--decode-threads", "4", "--lazy", "3"});
  const Truth w = r.truth();
  BOOST_TEST_REQUIRE(w.workers == 1);
  BOOST_TEST(w.torch_threads == 1);
  BOOST_TEST(w.most_threads >= 7, "the decode pool never started");
  BOOST_TEST(r.guard()["worker_threads"] == w.most_threads, r.guard().dump());
  require_considered(r, true);
  check_rail(r, 4, w.most_threads, "one thread per worker for the pool's library");
}

BOOST_AUTO_TEST_SUITE_END()
