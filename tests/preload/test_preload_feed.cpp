// Pipelines without hooks, end to end (docs/attach-preload.md "Hand-offs",
// report-guide.md "Producers"): programs written the way users write them
// — Python trainers fed by a multiprocessing.Queue, Pool.imap or a
// ProcessPoolExecutor, C trainers with a condition-variable queue or a
// pipe, large pipe messages, and a multi-threaded program with no
// pipeline — run under the shim, then
// `stallscope report --json`. Each checks the steps against the program's
// own count, the producers and the verdict; numbers with tolerance, no
// speed. STALLSCOPE_KEEP_TRACES=DIR keeps each case's run directory.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "cpu_premise.hpp"
#include "keep_traces.hpp"
#include "preload/preload_run.hpp"

using namespace stallscope::test;
using nlohmann::json;

namespace {

const std::string kPython = "/usr/bin/python3";

std::string script(const std::string& name) {
  return std::string(STALLSCOPE_SOURCE_DIR) + "/tests/preload/" + name;
}

std::set<uint32_t> numbers_after(const RunResult& r, const std::string& key) {
  std::set<uint32_t> out;
  const size_t at = r.out.find(key + " ");
  if (at == std::string::npos) return out;
  std::istringstream in(r.out.substr(at + key.size() + 1, r.out.find('\n', at) - at - key.size() - 1));
  for (uint32_t v; in >> v;) out.insert(v);
  return out;
}

// The report of a run directory: its only rank. The run is kept under
// STALLSCOPE_KEEP_TRACES (tests/keep_traces.hpp), named by the case.
json report(const std::string& run_dir) {
  stallscope_tests::keep_traces(
      run_dir, "feed-" + boost::unit_test::framework::current_test_case().p_name.get());
  const RunResult rep = run({build_dir() + "/bin/stallscope", "report", "--json", run_dir}, {},
                            false, 120);
  BOOST_TEST_REQUIRE(rep.exit_code == 0, rep.err);
  const json j = json::parse(rep.out);
  BOOST_TEST_REQUIRE(j["ranks"].size() == 1u);
  return j["ranks"][0];
}

std::string source(const json& r) { return r["step_source"]["kind"].get<std::string>(); }
std::string cause(const json& r) { return r["cause"].get<std::string>(); }

std::set<uint32_t> producer_pids(const json& r) {
  std::set<uint32_t> out;
  for (const auto& p : r["feed"]["producers"]) out.insert(p["pid"].get<uint32_t>());
  return out;
}

const json* stage(const json& r, const std::string& name) {
  for (const auto& s : r["stages"]) if (s["name"] == name) return &s;
  return nullptr;
}

// Steps within [n - lo, n + 1] of the program's own count: the first
// relay wake-up of a pair only makes it known (docs/attach-preload.md).
void check_steps(const json& r, long long n, long long lo = 1) {
  const auto steps = r["steps"]["total"].get<long long>();
  BOOST_TEST(steps >= n - lo, steps << " steps, the program made " << n);
  BOOST_TEST(steps <= n + 1, steps << " steps, the program made " << n);
}

// more_workers for producers: at most 4x today's producers; beyond,
// Little's law's count is in the evidence and the prediction a bound
// (docs/remedies.md).
void check_producer_cap(const json& j, const json& m) {
  const double w = m["inputs"]["producers"]["value"].get<double>();
  const double proposed = m["inputs"]["suggested_producers"]["value"].get<double>();
  const double needed = m["inputs"]["producers_needed"]["value"].get<double>();
  BOOST_TEST(proposed <= 4 * w, m.dump());
  BOOST_TEST(m["inputs"]["most_producers"]["value"].get<double>() == 4 * w, m.dump());
  if (needed > 4 * w) {
    BOOST_TEST(proposed == 4 * w, m.dump());
    BOOST_TEST(m["bound"].get<bool>(), m.dump());
    BOOST_TEST(m["evidence"].get<std::string>().find("Little's law asks for " +
                                                     std::to_string(int(needed))) != std::string::npos,
               m.dump());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_feed)

// Two forked workers, 120 ms per item (a sleep: blocked elsewhere, as a
// network read would be), feed a trainer that trains 5 ms per item: it
// waits most of each step, even beside other busy programs.
BOOST_AUTO_TEST_CASE(mp_queue_workers_that_do_not_keep_up) {
  TempDir dir;
  const RunResult r = run({kPython, script("mp_queue_trainer.py"), "15", "120", "5"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) == "handoffs");
  check_steps(j, r.value("GETS"));
  BOOST_TEST(j["feed"]["found"].get<bool>());
  BOOST_TEST(producer_pids(j) == numbers_after(r, "WORKER_PIDS"));
  BOOST_TEST(j["feed"]["channel"] == "multiprocessing queue");
  BOOST_TEST(j["feed"]["items_per_step"].get<double>() == 1.0, boost::test_tools::tolerance(0.1));
  BOOST_TEST(cause(j).rfind("input-bound", 0) == 0, cause(j));
  // Starved: the time between a worker's items is its time per item, most
  // of it blocked elsewhere (the sleep).
  BOOST_TEST(j["feed"]["busy_ms_per_item"].get<double>() >= 110.0, j["feed"].dump());
  BOOST_TEST(j["feed"]["other_ms_per_item"].get<double>() >= 90.0, j["feed"].dump());
  const json* st = stage(j, "producers");
  BOOST_REQUIRE(st != nullptr);
  BOOST_TEST((*st)["measured"].get<bool>());
  BOOST_TEST((*st)["workers"].get<double>() == 2.0);
  // More producers: they mostly wait (far longer than their CPU time), so
  // more of them than the cores help, busy machine or not.
  BOOST_REQUIRE(!j["remedies"].empty());
  const json& m = j["remedies"][0];
  BOOST_TEST(m["id"] == "more_workers", j["remedies"].dump());
  BOOST_TEST(m["title"] == "Add producer processes");
  BOOST_TEST(m["inputs"]["suggested_producers"]["value"].get<double>() >= 3.0);
  // Little's law asks for about 24 (120 ms per item, 5 ms of training):
  // 8 proposed, a bound.
  check_producer_cap(j, m);
}

// Workers far faster than the trainer: the queue is always full, the
// trainer never waits, and its steps still come from its gets.
// Its verdict needs CPUs the trainer and workers get: it runs as a ctest
// entry of its own (STALLSCOPE_CASE_ENTRY=1), which skips, visibly, when
// the verdict is wrong while other processes keep the CPUs busy.
BOOST_AUTO_TEST_CASE(an_always_full_queue_has_steps_and_a_compute_verdict) {
  if (std::getenv("STALLSCOPE_CASE_ENTRY") == nullptr) {
    BOOST_TEST_MESSAGE("runs as its own ctest entry (test_preload_feed.an_always_full_queue_...)");
    return;
  }
  TempDir dir;
  const RunResult r = run({kPython, script("mp_queue_trainer.py"), "15", "0", "15"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) == "handoffs");
  check_steps(j, r.value("GETS"));
  BOOST_TEST(producer_pids(j) == numbers_after(r, "WORKER_PIDS"));
  // The trainer never waits for data. (Its verdict is compute-bound on an
  // idle machine; beside other busy programs its spin is off CPU: host
  // blocked.)
  const auto& parts = j["parts"];
  const double data = parts["data.storage"]["share"].get<double>() +
                      parts["data.preprocess"]["share"].get<double>() +
                      parts["data.unknown"]["share"].get<double>();
  bool more = false;
  for (const auto& m : j["remedies"]) more = more || m["id"] == "more_workers";
  if (cause(j).rfind("input-bound", 0) == 0 || data >= 0.1 || more)
    if (const std::string busy = stallscope::test::cpus_busy(2); !busy.empty())
      stallscope::test::skip_case("the trainer waited for data (" + cause(j) + "): " + busy);
  BOOST_TEST(cause(j).rfind("input-bound", 0) != 0, cause(j));
  BOOST_TEST(data < 0.1, parts.dump());
  BOOST_TEST(!more);
}

// Pool.imap: the workers' results reach the pool's result-handler thread,
// which wakes the trainer: a relay.
BOOST_AUTO_TEST_CASE(pool_imap_has_its_result_thread_as_a_relay) {
  TempDir dir;
  const RunResult r = run({kPython, script("pool_trainer.py"), "30", "40"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) == "handoffs");
  // Through a relay only the gets that waited are seen: a result already
  // there when the trainer asks wakes nobody (docs/attach-preload.md); the
  // report then says a step may hold several objects.
  const long long items = r.value("ITEMS"), steps = j["steps"]["total"].get<long long>();
  check_steps(j, items, items / 2);
  if (steps < items * 4 / 5) BOOST_TEST(j["warnings"].dump().find("through a relay") != std::string::npos);
  BOOST_REQUIRE(j["feed"]["relays"].size() == 1u);
  BOOST_TEST(j["feed"]["relays"][0]["tid"].get<long long>() == r.value("RESULT_HANDLER_TID"));
  // The workers, and the trainer's own process that sends the pool its
  // stop sentinel, reached the result thread; the workers made the items.
  const auto workers = numbers_after(r, "WORKER_PIDS");
  uint64_t from_workers = 0;
  for (const auto& p : j["feed"]["producers"])
    if (workers.count(p["pid"].get<uint32_t>())) from_workers += p["items"].get<uint64_t>();
  BOOST_TEST(from_workers >= 30u);
  // Each of the pool's workers made some (a task takes 40 ms: the second
  // takes one while the first sleeps).
  const auto producers = producer_pids(j);
  for (uint32_t w : workers) BOOST_TEST(producers.count(w) == 1u, w << " is no producer");
  BOOST_TEST(cause(j).rfind("input-bound", 0) == 0, cause(j));
  // The trainer works 0.2 ms per item, each takes 40 ms: Little's law asks
  // for about 200 producers; at most 4x today's are proposed.
  BOOST_REQUIRE(!j["remedies"].empty());
  BOOST_TEST(j["remedies"][0]["id"] == "more_workers", j["remedies"].dump());
  check_producer_cap(j, j["remedies"][0]);
  BOOST_TEST(j["remedies"][0]["bound"].get<bool>(), j["remedies"][0].dump());
  // The pool's 2 workers are the ones to multiply, not the trainer's task
  // handler that posted one stop sentinel: Pool(processes=8).
  BOOST_TEST(j["remedies"][0]["title"] == "Add producer processes");
  BOOST_TEST(j["remedies"][0]["inputs"]["producers"]["value"].get<double>() == 2.0,
             j["feed"]["producers"].dump());
}

// ProcessPoolExecutor.map, and .submit with as_completed: the executor's
// manager thread reads the workers' results and sets each future, waking
// the trainer: a relay, as with Pool.imap. Workers sleep 40 ms per item
// (blocked elsewhere), the trainer works 1 ms: Little's law asks for about
// 40 producers, the remedy proposes at most 4x today's 2, as a bound.
BOOST_AUTO_TEST_CASE(process_pool_executor_has_its_manager_thread_as_a_relay) {
  for (const std::string how : {"map", "as_completed"}) {
    BOOST_TEST_CONTEXT(how) {
      TempDir dir;
      const RunResult r = run({kPython, script("executor_trainer.py"), "30", "40", "1", how},
                              {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
      BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
      const json j = report(dir / "run");
      BOOST_TEST(source(j) == "handoffs");
      const long long items = r.value("ITEMS"), steps = j["steps"]["total"].get<long long>();
      check_steps(j, items, items / 2);  // through a relay: only the gets that waited
      if (steps < items * 4 / 5)
        BOOST_TEST(j["warnings"].dump().find("through a relay") != std::string::npos);
      BOOST_REQUIRE(j["feed"]["relays"].size() == 1u);
      BOOST_TEST(j["feed"]["relays"][0]["tid"].get<long long>() == r.value("RESULT_HANDLER_TID"));
      const auto workers = numbers_after(r, "WORKER_PIDS");
      BOOST_TEST_REQUIRE(workers.size() == 2u);
      const auto producers = producer_pids(j);
      uint64_t from_workers = 0;
      for (const auto& p : j["feed"]["producers"])
        if (workers.count(p["pid"].get<uint32_t>())) from_workers += p["items"].get<uint64_t>();
      BOOST_TEST(from_workers >= 30u);
      for (uint32_t w : workers) BOOST_TEST(producers.count(w) == 1u, w << " is no producer");
      BOOST_TEST(cause(j).rfind("input-bound", 0) == 0, cause(j));
      BOOST_REQUIRE(!j["remedies"].empty());
      const json& m = j["remedies"][0];
      BOOST_TEST(m["id"] == "more_workers", j["remedies"].dump());
      BOOST_TEST(m["title"] == "Add producer processes");
      check_producer_cap(j, m);
      BOOST_TEST(m["bound"].get<bool>(), m.dump());  // Little's law asked for more than 4x
    }
  }
}

// A C trainer whose loader thread hands batches over a condition-variable
// queue: decoding (10 ms) dwarfs training (1 ms).
BOOST_AUTO_TEST_CASE(a_condition_variable_queue_names_the_loader_thread) {
  TempDir dir;
  const RunResult r = run({helper("relay_trainer"), "30", "10", "1"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) == "handoffs");
  check_steps(j, r.value("STEPS"), 3);
  BOOST_REQUIRE(j["feed"]["producers"].size() == 1u);
  BOOST_TEST(j["feed"]["producers"][0]["tid"].get<long long>() == r.value("LOADER_TID"));
  BOOST_TEST(j["feed"]["channel"] == "condition variable");
  BOOST_TEST(cause(j).rfind("input-bound", 0) == 0, cause(j));
  // The loader's CPU clock: about 10 ms per item.
  BOOST_TEST(j["feed"]["cpu_ms_per_item"].get<double>() >= 5.0, j["feed"].dump());
}

// A C trainer whose loader thread reads a file and decodes it (4 ms of
// CPU) for each batch, then writes the batch's number into a pipe; the
// trainer reads it and trains 1 ms: one step per batch, the loader thread
// its only producer, its storage reads in the producers' time.
BOOST_AUTO_TEST_CASE(a_pipe_trainer_names_its_loader_thread) {
  TempDir dir;
  std::filesystem::create_directories(dir / "data");
  for (int i = 0; i < 2; ++i) {
    const int fd =
        ::open((dir / ("data/f" + std::to_string(i))).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    BOOST_REQUIRE(fd >= 0 && ::write(fd, "batch", 5) == 5);
    ::close(fd);
  }
  const RunResult r = run({helper("preload_trainer"), dir / "data", "2", "16", "4", "1", "thread"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) == "handoffs");
  check_steps(j, r.value("STEPS"));
  BOOST_TEST(j["feed"]["channel"] == "pipe");
  BOOST_REQUIRE(j["feed"]["producers"].size() == 1u);
  const json& p = j["feed"]["producers"][0];
  BOOST_TEST(p["tid"].get<long long>() != p["pid"].get<long long>());  // a thread, not main
  BOOST_TEST(j["feed"]["storage_ms_per_item"].get<double>() > 0.0, j["feed"].dump());
  BOOST_TEST(cause(j).rfind("input-bound", 0) == 0, cause(j));
}

// 1 MiB messages over a pipe, each read in pieces: one step per message.
// The producer sleeps 20 ms before each, the consumer works 2 ms on it:
// input-bound with a wide margin.
BOOST_AUTO_TEST_CASE(large_pipe_messages_are_one_step_each) {
  TempDir dir;
  const RunResult r = run({helper("big_messages"), "12", std::to_string(1 << 20)},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) == "handoffs");
  check_steps(j, r.value("MESSAGES"));
  BOOST_TEST(j["feed"]["bytes_per_item"].get<double>() == double(1 << 20),
             boost::test_tools::tolerance(0.01));
  BOOST_REQUIRE(j["feed"]["producers"].size() == 1u);
  BOOST_TEST(j["feed"]["producers"][0]["tid"].get<long long>() == r.value("PRODUCER_TID"));
  BOOST_TEST(cause(j).rfind("input-bound", 0) == 0, cause(j));
}

// Threads contending for the GIL and a shared lock: no pipeline, so no
// hand-off, no data wait, no producers.
BOOST_AUTO_TEST_CASE(threads_without_a_pipeline_have_no_producers) {
  TempDir dir;
  const RunResult r = run({kPython, script("gil_threads.py"), "1.5"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json j = report(dir / "run");
  BOOST_TEST(source(j) != "handoffs");
  BOOST_TEST(source(j) != "data_waits");
  BOOST_TEST(!j["feed"]["found"].get<bool>());
  BOOST_TEST(j["feed"]["producers"].empty());
  BOOST_TEST(cause(j).rfind("input-bound", 0) != 0, cause(j));  // no false data waits
}

BOOST_AUTO_TEST_SUITE_END()
