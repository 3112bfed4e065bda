// Hand-offs recorded by the shim (docs/attach-preload.md, "Hand-offs"):
// programs with no hooks — C trainers with a pipe or a condition-variable
// queue, Python trainers with multiprocessing queues and Pool.imap, and a
// multi-threaded Python program with no pipeline — run under plain
// LD_PRELOAD, their channel_handoff records and data waits read back.
// Counts are checked against what each program did; no test asserts speed.
#include <boost/test/unit_test.hpp>

#include <set>
#include <sstream>
#include <string>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

using format::ChannelType;

const std::string kPython = "/usr/bin/python3";

std::string script(const std::string& name) {
  return std::string(STALLSCOPE_SOURCE_DIR) + "/tests/preload/" + name;
}

std::vector<Ev> handoffs(const RunTrace& t, ChannelType type) {
  std::vector<Ev> out;
  for (const Ev& e : t.of_kind(format::Kind::kChannelHandoff)) {
    if (e.handoff.channel_type == uint8_t(type)) out.push_back(e);
  }
  return out;
}

std::vector<Ev> waits(const RunTrace& t, format::WaitSource source) {
  std::vector<Ev> out;
  for (const Ev& e : t.of_kind(format::Kind::kDataWait)) {
    if (e.work.h.aux == uint32_t(source)) out.push_back(e);
  }
  return out;
}

std::set<uint32_t> numbers(const std::string& line) {
  std::set<uint32_t> out;
  std::istringstream in(line);
  for (uint32_t v; in >> v;) out.insert(v);
  return out;
}

std::string line_of(const RunResult& r, const std::string& key) {
  const size_t at = r.out.find(key + " ");
  if (at == std::string::npos) return {};
  const size_t end = r.out.find('\n', at);
  return r.out.substr(at + key.size() + 1, end - at - key.size() - 1);
}

// Every hand-off is well formed: requested <= got, put <= got.
void check_times(const std::vector<Ev>& hs) {
  for (const Ev& e : hs) {
    BOOST_TEST(e.dur_ns >= 0);
    BOOST_TEST(e.handoff.consumer_tid == e.tid);
    BOOST_TEST(e.handoff.consumer_pid == e.pid);
  }
}

// The pid of the process whose thread `tid` is.
uint32_t handler_pid(const RunTrace& t, uint32_t tid) {
  for (const Ev& e : t.events) if (e.tid == tid) return e.pid;
  return 0;
}

size_t relays(const RunTrace& t) {
  return handoffs(t, ChannelType::kCondVar).size() + handoffs(t, ChannelType::kSemaphore).size();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_handoffs)

BOOST_AUTO_TEST_CASE(condition_variable_queue_is_a_relay_from_the_loader_thread) {
  TempDir dir;
  const int steps = 20;
  const RunResult r = run({helper("relay_trainer"), std::to_string(steps), "8", "1"},
                          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  const auto loader = uint32_t(r.value("LOADER_TID"));
  const auto hs = handoffs(t, ChannelType::kCondVar);
  // Every step waits (decoding, 8 ms, dwarfs training, 1 ms); the first
  // wake-up of a pair only makes it known.
  BOOST_TEST(hs.size() >= size_t(steps - 2), hs.size() << " relays");
  BOOST_TEST(hs.size() <= size_t(steps));
  check_times(hs);
  for (const Ev& e : hs) {
    BOOST_TEST(e.handoff.producer_tid == loader);
    BOOST_TEST(e.handoff.producer_pid == e.pid);
    BOOST_TEST(e.tid == e.pid);  // the trainer's (main) thread
    BOOST_TEST(e.handoff.parts == 1u);
  }
  const auto w = waits(t, format::WaitSource::kRelay);
  BOOST_TEST(w.size() == hs.size());
  for (const Ev& e : w) {
    BOOST_TEST(e.name == "relay: condition variable signalled by a producer thread");
    BOOST_TEST(e.tid == e.pid);
  }
}

BOOST_AUTO_TEST_CASE(relays_off_records_no_relay) {
  TempDir dir;
  const RunResult r = run({helper("relay_trainer"), "12", "8", "1"},
                          {{"STALLSCOPE_OUT", dir / "run"}, {"STALLSCOPE_PRELOAD_RELAYS", "off"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(!t.events.empty());  // the run was traced
  BOOST_TEST(relays(t) == 0u);
  BOOST_TEST(waits(t, format::WaitSource::kRelay).empty());
}

BOOST_AUTO_TEST_CASE(pipe_trainer_has_one_handoff_per_batch_from_the_loader) {
  TempDir dir;
  std::filesystem::create_directories(dir / "data");
  for (int i = 0; i < 2; ++i) {
    const int fd = ::open((dir / ("data/f" + std::to_string(i))).c_str(),
                          O_CREAT | O_WRONLY | O_TRUNC, 0644);
    BOOST_REQUIRE(fd >= 0 && ::write(fd, "batch", 5) == 5);
    ::close(fd);
  }
  const int steps = 16;
  const RunResult r = run({helper("preload_trainer"), dir / "data", "2", std::to_string(steps),
                           "4", "1", "thread"},
                          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  std::set<uint32_t> loader;  // the thread that read the files
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    if (e.name.rfind(dir / "data/f", 0) == 0) loader.insert(e.tid);
  }
  BOOST_TEST_REQUIRE(loader.size() == 1u);
  const auto hs = handoffs(t, ChannelType::kPipe);
  BOOST_TEST(hs.size() == size_t(steps));  // training (1 ms) parts the batches
  check_times(hs);
  for (const Ev& e : hs) {
    BOOST_TEST(e.handoff.producer_tid == *loader.begin());
    BOOST_TEST(e.handoff.bytes == 8u);
    BOOST_TEST(e.handoff.parts == 1u);
    BOOST_TEST(e.ts_ns <= e.ts_ns + e.dur_ns);
  }
  // One data wait per message that waited, never more than one per batch.
  BOOST_TEST(waits(t, format::WaitSource::kPipe).size() <= size_t(steps));
}

BOOST_AUTO_TEST_CASE(large_pipe_messages_are_one_handoff_each) {
  TempDir dir;
  const int messages = 6;
  const uint64_t bytes = 1u << 20;
  const RunResult r = run({helper("big_messages"), std::to_string(messages),
                           std::to_string(bytes)},
                          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  const auto hs = handoffs(t, ChannelType::kPipe);
  BOOST_TEST_REQUIRE(hs.size() == size_t(messages));
  uint64_t parts = 0;
  for (const Ev& e : hs) {
    BOOST_TEST(e.handoff.bytes == bytes);
    BOOST_TEST(e.handoff.parts > 1u);  // a pipe gives at most 64 KiB a read
    BOOST_TEST(e.handoff.producer_tid == uint32_t(r.value("PRODUCER_TID")));
    parts += e.handoff.parts;
  }
  BOOST_TEST(parts == uint64_t(r.value("READS")));
}

BOOST_AUTO_TEST_CASE(mp_queue_gets_are_one_handoff_each_from_both_workers) {
  TempDir dir;
  const int items = 10;
  const RunResult r = run({kPython, script("mp_queue_trainer.py"), std::to_string(items), "20", "2"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  const std::set<uint32_t> workers = numbers(line_of(r, "WORKER_PIDS"));
  BOOST_TEST_REQUIRE(workers.size() == 2u);
  std::vector<Ev> hs;
  std::set<uint32_t> producers;
  for (const Ev& e : handoffs(t, ChannelType::kMpQueue)) {
    if (workers.count(e.pid) != 0) continue;  // the workers' own traffic
    hs.push_back(e);
    producers.insert(e.handoff.producer_pid);
  }
  BOOST_TEST(hs.size() == size_t(r.value("GETS")));
  BOOST_TEST(producers == workers);
  size_t large = 0;
  for (const Ev& e : hs) {
    BOOST_TEST(e.tid == e.pid);
    large += e.handoff.parts > 2;  // 200 KB: header and several payload reads
    BOOST_TEST((e.handoff.bytes > 200000u || e.handoff.bytes < 1000u));
  }
  BOOST_TEST(large == size_t(items));
  // Waits, one per message at most, all on the trainer's thread.
  const auto w = waits(t, format::WaitSource::kPipe);
  BOOST_TEST(w.size() <= hs.size());
  BOOST_TEST(w.size() >= 1u);
}

BOOST_AUTO_TEST_CASE(full_mp_queue_still_records_every_get) {
  TempDir dir;
  const int items = 8;
  const RunResult r = run({kPython, script("mp_queue_trainer.py"), std::to_string(items), "0", "20"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  const std::set<uint32_t> workers = numbers(line_of(r, "WORKER_PIDS"));
  size_t gets = 0;
  for (const Ev& e : handoffs(t, ChannelType::kMpQueue)) gets += workers.count(e.pid) == 0;
  BOOST_TEST(gets == size_t(r.value("GETS")));
}

BOOST_AUTO_TEST_CASE(pool_imap_is_a_relay_from_the_result_handler) {
  TempDir dir;
  const int items = 16;
  const RunResult r = run({kPython, script("pool_trainer.py"), std::to_string(items), "30"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST_REQUIRE(r.value("ITEMS") == items);
  const RunTrace t = load_run(dir / "run");
  const auto handler = uint32_t(r.value("RESULT_HANDLER_TID"));
  const std::set<uint32_t> workers = numbers(line_of(r, "WORKER_PIDS"));
  size_t main_relays = 0;
  for (const Ev& e : t.of_kind(format::Kind::kChannelHandoff)) {
    const auto type = ChannelType(e.handoff.channel_type);
    if (type != ChannelType::kSemaphore && type != ChannelType::kCondVar) continue;
    if (e.tid != e.pid) continue;
    BOOST_TEST(e.handoff.producer_tid == handler);
    ++main_relays;
  }
  BOOST_TEST(main_relays >= size_t(items / 2), main_relays << " relays");
  BOOST_TEST(main_relays <= size_t(items));
  std::set<uint32_t> from;
  size_t handler_gets = 0;
  for (const Ev& e : handoffs(t, ChannelType::kMpQueue)) {
    if (e.tid != handler) continue;
    ++handler_gets;
    from.insert(e.handoff.producer_pid);
  }
  BOOST_TEST(handler_gets >= size_t(items));
  // The workers' results, and the sentinel the trainer's own thread puts
  // when the pool terminates.
  size_t from_workers = 0;
  for (uint32_t pid : from) {
    BOOST_TEST((workers.count(pid) == 1u || pid == uint32_t(t.files.empty() ? 0 : handler_pid(t, handler))),
               pid << " is no worker");
    from_workers += workers.count(pid);
  }
  BOOST_TEST(from_workers >= 1u);
}

BOOST_AUTO_TEST_CASE(gil_and_a_shared_lock_are_no_relays) {
  TempDir dir;
  const RunResult r = run({kPython, script("gil_threads.py"), "1.5"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST_REQUIRE(r.value("ROUNDS") > 0);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(!t.events.empty());
  for (const Ev& e : t.of_kind(format::Kind::kChannelHandoff)) {
    BOOST_TEST(e.handoff.channel_type != uint8_t(ChannelType::kCondVar), "tid " << e.tid);
    BOOST_TEST(e.handoff.channel_type != uint8_t(ChannelType::kSemaphore), "tid " << e.tid);
  }
  BOOST_TEST(t.of_kind(format::Kind::kDataWait).empty());
}

BOOST_AUTO_TEST_SUITE_END()
