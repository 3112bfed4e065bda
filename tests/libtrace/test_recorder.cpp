// Black-box tests of the recorder: a traced child process (recorder_probe)
// records known events and ends in a chosen way; the file is then read
// back with the reader. Covers the round trip of every event kind and
// RELIABILITY.md cases 1-3 and 5.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "probe_runner.hpp"

using namespace stallscope;
using namespace stallscope::test;
using format::Kind;

namespace {

std::map<std::string, std::string> env_for(const TempDir& d,
                                           std::map<std::string, std::string> extra = {}) {
  extra["STALLSCOPE_OUT"] = d.path();
  return extra;
}

Loaded load_single(const TempDir& d) {
  auto files = trace_files(d.path());
  BOOST_REQUIRE_EQUAL(files.size(), 1u);
  return load(files[0]);
}

const reader::Event* find_kind(const Loaded& l, Kind k, size_t* index = nullptr) {
  for (size_t i = 0; i < l.events.size(); ++i)
    if (l.events[i].kind == static_cast<uint8_t>(k)) {
      if (index) *index = i;
      return &l.events[i];
    }
  return nullptr;
}

uint64_t sum_totals(const Loaded& l, uint64_t format::TrackTotals::*field) {
  uint64_t s = 0;
  for (const auto& t : l.end.tracks) s += t.*field;
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recorder)

BOOST_AUTO_TEST_CASE(round_trips_every_event_kind_and_attribute) {
  TempDir d;
  auto r = run_probe({"all-kinds"}, env_for(d));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
  for (Kind k : {Kind::kStep, Kind::kDataWait, Kind::kStorageRead, Kind::kPreprocess,
                 Kind::kBatchReady, Kind::kApiCall, Kind::kH2D, Kind::kD2H, Kind::kD2D,
                 Kind::kMemset, Kind::kKernel, Kind::kCollective, Kind::kSync, Kind::kRange,
                 Kind::kCounter, Kind::kMark, Kind::kCapture})
    BOOST_TEST_CONTEXT("kind " << int(k)) { BOOST_TEST(find_kind(l, k) != nullptr); }

  const auto* io = find_kind(l, Kind::kStorageRead);
  BOOST_REQUIRE(io && io->has(format::Ext::kIo));
  BOOST_TEST(io->io.bytes == 4096u);
  BOOST_TEST(io->io.offset == (5ull << 32));
  BOOST_TEST(io->io.hit_bytes == 1024u);
  BOOST_TEST(io->io.queued_ns == 250u);
  BOOST_TEST(io->io.sample_id == 42u);
  BOOST_TEST(io->io.tier == uint8_t(format::Tier::kNetwork));
  BOOST_TEST(io->io.cache == uint8_t(format::Cache::kPartial));
  BOOST_TEST(io->io.cache_method == uint8_t(format::CacheMethod::kNowait));
  BOOST_TEST(io->io.queue_depth == 32);
  BOOST_TEST(io->corr == 3u);
  BOOST_TEST(io->async());
  BOOST_TEST(l.strings_of_events[size_t(io - l.events.data())] == "/data/shard-0001.bin");

  const auto* pre = find_kind(l, Kind::kPreprocess);
  BOOST_REQUIRE(pre && pre->has(format::Ext::kWork));
  BOOST_TEST(pre->work.sample_id == 42u);
  BOOST_TEST(pre->work.batch_id == 3u);
  BOOST_TEST(pre->work.count == 4u);
  BOOST_TEST(pre->work.h.aux == 2u);  // worker

  size_t bi = 0;
  const auto* ready = find_kind(l, Kind::kBatchReady, &bi);
  BOOST_REQUIRE(ready);
  BOOST_TEST(ready->corr == 3u);
  BOOST_REQUIRE_EQUAL(l.ids[bi].size(), 10000u);  // two id-list extensions
  BOOST_TEST(l.ids[bi].front() == 1000u);
  BOOST_TEST(l.ids[bi].back() == 10999u);

  const auto* h2d = find_kind(l, Kind::kH2D);
  BOOST_REQUIRE(h2d && h2d->has(format::Ext::kCopy));
  BOOST_TEST(h2d->copy.bytes == (1u << 20));
  BOOST_TEST(h2d->copy.src == uint8_t(format::MemKind::kPageable));
  BOOST_TEST(h2d->copy.h.aux == 9u);  // stream
  BOOST_TEST((h2d->flags & format::kEmulated) != 0);
  BOOST_TEST(h2d->corr == 77u);

  const auto* coll = find_kind(l, Kind::kCollective);
  BOOST_REQUIRE(coll && coll->has(format::Ext::kCollective));
  BOOST_TEST(coll->collective.bytes == (1u << 26));
  BOOST_TEST(coll->collective.comm_id == 0xabcdefu);
  BOOST_TEST(coll->collective.seq == 12u);
  BOOST_TEST(coll->collective.nranks == 4u);
  BOOST_TEST(coll->collective.peer == -1);
  BOOST_TEST((coll->collective.h.aux & 0xff) == uint32_t(format::CollOp::kAllReduce));

  const auto* api = find_kind(l, Kind::kApiCall);
  BOOST_REQUIRE(api && api->has(format::Ext::kApi));
  BOOST_TEST(api->api.domain == uint8_t(format::ApiDomain::kCudaRuntime));
  BOOST_TEST(api->api.h.aux == 211u);

  const auto* sync = find_kind(l, Kind::kSync);
  BOOST_REQUIRE(sync && sync->has(format::Ext::kDevice));
  BOOST_TEST(sync->device.sync_kind == 2);

  const auto* counter = find_kind(l, Kind::kCounter);  // the probe's, not the sampler's
  bool found_counter = false;
  for (size_t i = 0; i < l.events.size(); ++i)
    if (l.strings_of_events[i] == "queue.ready") {
      found_counter = true;
      BOOST_TEST(l.events[i].number() == 2.5);
      BOOST_TEST(l.events[i].corr == 1234u);
    }
  BOOST_TEST(counter != nullptr);
  BOOST_TEST(found_counter);

  const auto* step = find_kind(l, Kind::kStep);
  BOOST_REQUIRE(step && step->has(format::Ext::kStep));
  BOOST_TEST(step->step.index == 7u);
  BOOST_TEST(step->dur_ns > 0);

  BOOST_TEST(l.by_name["checkpoint"] == 1u);
  BOOST_TEST(l.by_name["nested"] == 1u);
  BOOST_REQUIRE_EQUAL(l.attachments.size(), 1u);
  BOOST_TEST(l.attachments[0].name == "config");
  BOOST_TEST(l.attachments[0].data == "{\"workers\":4}");
  bool named = false;
  for (const auto& [id, n] : l.track_names) named = named || n == "probe-main";
  BOOST_TEST(named);

  auto meta = nlohmann::json::parse(l.metadata);
  BOOST_TEST(meta.at("pid").get<int>() == int(l.header.pid));
  BOOST_TEST(meta.at("rank").get<int>() == 0);
  BOOST_TEST(meta.at("rank_source").get<std::string>() == "default");
  BOOST_TEST(meta.contains("affinity"));
  BOOST_TEST(meta.contains("host"));
  BOOST_TEST(meta.contains("cmdline"));
  BOOST_TEST(meta.at("run_id_source").get<std::string>() == "STALLSCOPE_OUT");
}

BOOST_AUTO_TEST_CASE(eight_threads_record_a_million_spans_each_without_loss) {
  TempDir d;
  // Within budget: 8 x 32 MiB of thread buffers hold every span even if
  // the flusher were slow; it drains them concurrently anyway.
  auto r = run_probe({"threads", "8", "1000000"},
                     env_for(d, {{"STALLSCOPE_BUFFER_MB", "512"},
                                 {"STALLSCOPE_THREAD_BUFFER_KB", "32768"},
                                 {"STALLSCOPE_MAX_MB", "1024"},
                                 {"STALLSCOPE_SAMPLE_MS", "0"}}),
                     {}, {}, 300);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
  BOOST_TEST(l.by_name["work"] == 8000000u);
  BOOST_TEST(sum_totals(l, &format::TrackTotals::dropped_buffer) == 0u);
  BOOST_TEST(l.gap_dropped == 0u);
}

BOOST_AUTO_TEST_CASE(overflow_drops_exactly_the_events_not_written) {
  TempDir d;
  auto r = run_probe({"threads", "8", "200000"},
                     env_for(d, {{"STALLSCOPE_THREAD_BUFFER_KB", "64"},
                                 {"STALLSCOPE_FLUSH_MS", "1000"},
                                 {"STALLSCOPE_SAMPLE_MS", "0"}}));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  Loaded l = load_single(d);
  const uint64_t issued = uint64_t(r.value("issued"));
  const uint64_t written = l.by_name["work"];
  const uint64_t dropped = sum_totals(l, &format::TrackTotals::dropped_buffer);
  BOOST_TEST(issued == 1600000u);
  BOOST_TEST(dropped > 0u);
  BOOST_TEST(written + dropped == issued);
  // Gaps in the stream account for drops followed by a written event
  // (whether any event follows a drop depends on scheduling; the thread
  // buffer's own tests check the gap record itself).
  BOOST_TEST(l.gap_dropped <= dropped);
  // The End chunk's written counts agree with what is in the file.
  uint64_t all_events = l.events.size();
  BOOST_TEST(sum_totals(l, &format::TrackTotals::written) == all_events);
}

BOOST_AUTO_TEST_CASE(events_of_exited_and_idle_threads_all_reach_the_file) {
  TempDir d;
  auto r = run_probe({"thread-exit", "3000"},
                     env_for(d, {{"STALLSCOPE_FLUSH_MS", "60000"}}));  // no periodic flush
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
  BOOST_TEST(l.by_name["exited_thread"] == 3000u);
  BOOST_TEST(l.by_name["idle_thread"] == 3000u);
}

// Records written for another thread land on a track carrying that
// thread's tid (one per tid, owned by the writer); tid 0 means the writer's own.
BOOST_AUTO_TEST_CASE(records_written_on_another_threads_behalf_carry_its_tid) {
  TempDir d;
  constexpr long kCount = 500;
  auto r = run_probe({"on-behalf", std::to_string(kCount)}, env_for(d));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  const auto main_tid = static_cast<uint32_t>(r.value("main_tid"));
  const auto worker_tid = static_cast<uint32_t>(r.value("worker_tid"));
  BOOST_REQUIRE(main_tid != 0 && worker_tid != 0 && main_tid != worker_tid);
  Loaded l = load_single(d);
  std::map<uint32_t, size_t> reads_by_tid, spans_by_tid;
  std::map<uint32_t, std::set<uint32_t>> tracks_by_tid;
  for (const auto& e : l.events) {
    const uint32_t tid = l.track_tids[e.track_id];
    if (e.kind == static_cast<uint8_t>(Kind::kStorageRead)) ++reads_by_tid[tid];
    else if (e.kind == static_cast<uint8_t>(Kind::kPreprocess)) ++spans_by_tid[tid];
    else continue;  // (the recorder's own track carries the process id as its tid)
    tracks_by_tid[tid].insert(e.track_id);
  }
  BOOST_TEST(reads_by_tid[main_tid] == size_t(kCount));
  BOOST_TEST(reads_by_tid[999999u] == size_t(kCount));
  BOOST_TEST(reads_by_tid[worker_tid] == size_t(kCount));  // tid 0: its own track
  BOOST_TEST(spans_by_tid[main_tid] == size_t(kCount));
  // The main thread's own track and the one written for it are distinct tracks.
  BOOST_TEST(tracks_by_tid[main_tid].size() == 2u);
  BOOST_TEST(sum_totals(l, &format::TrackTotals::dropped_buffer) == 0u);
}

// Every thread the recorder starts carries a "stallscope-" name (at most 15
// bytes, else Linux refuses it): the preload shim leaves such threads
// untraced, and tells them by that name alone.
BOOST_AUTO_TEST_CASE(the_recorders_threads_are_named) {
  TempDir d;
  auto r = run_probe({"thread-names"}, env_for(d));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  std::set<std::string> names;
  for (size_t at = 0; (at = r.out.find("THREAD ", at)) != std::string::npos;) {
    const size_t end = r.out.find('\n', at);
    names.insert(r.out.substr(at + 7, end - at - 7));
    at = end;
  }
  BOOST_TEST(names.count("stallscope-flsh") == 1u, r.out);
  BOOST_TEST(names.count("stallscope-samp") == 1u, r.out);
  size_t unnamed = 0;  // threads that are neither the program's nor named
  for (const auto& n : names) unnamed += n.rfind("stallscope-", 0) != 0 && n != "recorder_probe";
  BOOST_TEST(unnamed == 0u, r.out);
}

// The flusher sleeps until its next flush (here a minute away) and polls
// the control file every 100 ms; a producer whose ring passes half full
// wakes it. 200,000 spans (6.4 MB) through a 256 KiB ring at 8 KiB per
// ~2.5 ms: 320 KiB between two control polls, so without the wake the ring
// overflows; with it, half the ring (~40 ms) is the margin.
BOOST_AUTO_TEST_CASE(a_ring_passing_half_full_is_drained_before_the_next_flush) {
  TempDir d;
  auto r = run_probe({"paced", "800", "250"},
                     env_for(d, {{"STALLSCOPE_FLUSH_MS", "60000"},
                                 {"STALLSCOPE_THREAD_BUFFER_KB", "256"},
                                 {"STALLSCOPE_SAMPLE_MS", "0"}}));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  Loaded l = load_single(d);
  BOOST_TEST(l.by_name["paced"] == 200000u);
  BOOST_TEST(sum_totals(l, &format::TrackTotals::dropped_buffer) == 0u);
}

// Regression: under STALLSCOPE_FLUSH_MS=60000 a ring just under half full
// was never drained (no wake below half, no flush for a minute), so a burst
// had only the other half: 4,000 spans (49 % of a 256 KiB ring), a pause,
// then 7,500 at full speed lost thousands. A control poll (every 100 ms)
// now drains a ring past a quarter; the burst finds it empty.
BOOST_AUTO_TEST_CASE(a_long_flush_interval_leaves_a_burst_the_whole_ring) {
  TempDir d;
  auto r = run_probe({"pause-then-burst", "4000", "1000", "7500"},
                     env_for(d, {{"STALLSCOPE_FLUSH_MS", "60000"},
                                 {"STALLSCOPE_THREAD_BUFFER_KB", "256"},
                                 {"STALLSCOPE_SAMPLE_MS", "0"}}));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  Loaded l = load_single(d);
  BOOST_TEST(l.by_name["fill"] == 4000u);
  BOOST_TEST(l.by_name["burst"] == 7500u);
  BOOST_TEST(sum_totals(l, &format::TrackTotals::dropped_buffer) == 0u);
}

BOOST_AUTO_TEST_CASE(sigkill_after_a_flush_keeps_everything_flushed) {
  TempDir d;
  auto r = run_probe({"kill-after-flush", "5000"}, env_for(d), "flushed",
                     [](pid_t pid) { ::kill(pid, SIGKILL); });
  BOOST_TEST(r.term_signal == SIGKILL);
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kTruncated));
  BOOST_TEST(l.by_name["before_flush"] == 5000u);
  BOOST_TEST(!l.end.present);
}

BOOST_AUTO_TEST_CASE(sigterm_completes_the_file_and_runs_the_programs_handler) {
  TempDir d;
  const std::string marker = d / "handler-ran";
  auto r = run_probe({"signal-own", marker, "3000"}, env_for(d), "ready",
                     [](pid_t pid) { ::kill(pid, SIGTERM); });
  BOOST_TEST(r.exit_code == 3);  // the program's handler ended it with _exit(3)
  BOOST_TEST(slurp(marker) == "handler ran\n");
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
  BOOST_TEST(l.by_name["before_signal"] == 3000u);
}

// SIGHUP is what a dropped ssh session sends (RELIABILITY.md 35).
BOOST_AUTO_TEST_CASE(default_fatal_signals_complete_the_file_then_kill) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    BOOST_TEST_CONTEXT("signal " << sig) {
      TempDir d;
      auto r = run_probe({"signal-default", "3000"}, env_for(d), "ready",
                         [sig](pid_t pid) { ::kill(pid, sig); });
      BOOST_TEST(r.term_signal == sig);
      Loaded l = load_single(d);
      BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
      BOOST_TEST(l.by_name["before_signal"] == 3000u);
    }
  }
}

BOOST_AUTO_TEST_CASE(underscore_exit_completes_the_file) {
  TempDir d;
  auto r = run_probe({"underscore-exit", "4000"}, env_for(d));
  BOOST_TEST(r.exit_code == 0);
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
  BOOST_TEST(l.by_name["before_exit"] == 4000u);
}

BOOST_AUTO_TEST_CASE(never_writes_into_a_program_file_that_reuses_its_descriptor) {
  TempDir d;
  const std::string own = d / "program-output.txt";
  auto r = run_probe({"close-all", own, "1000"}, env_for(d));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(slurp(own) == "program data\n");
  Loaded l = load_single(d);
  BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
  BOOST_TEST(l.by_name["before_close"] == 1000u);
  BOOST_TEST(l.by_name["after_close"] == 1000u);
}

// LeakSanitizer cannot check a fork child: whatever the parent's other
// threads held at the fork looks leaked there ("False leaks are possible").
const std::pair<std::string, std::string> kNoLeakCheckInForks{"ASAN_OPTIONS", "detect_leaks=0"};

BOOST_AUTO_TEST_CASE(fork_child_writes_its_own_file_that_names_its_parent) {
  TempDir d;
  auto r = run_probe({"fork", "2000"}, env_for(d, {kNoLeakCheckInForks}));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto files = trace_files(d.path());
  BOOST_REQUIRE_EQUAL(files.size(), 2u);
  for (const auto& f : files) {
    Loaded l = load(f);
    BOOST_TEST(static_cast<int>(l.status) == static_cast<int>(reader::Status::kComplete));
    if (l.header.pid == uint32_t(r.value("child"))) {
      BOOST_TEST(l.header.parent_pid == uint32_t(r.value("parent")));
      BOOST_TEST(l.by_name["child"] == 2000u);
      BOOST_TEST(l.by_name["parent_before"] == 0u);
    } else {
      BOOST_TEST(l.header.pid == uint32_t(r.value("parent")));
      BOOST_TEST(l.by_name["parent_before"] == 2000u);
      BOOST_TEST(l.by_name["parent_after"] == 2000u);
      BOOST_TEST(l.by_name["child"] == 0u);
    }
  }
}

// The sampler's periods in force in a file (sampler.period_ms), with the
// time each began, and the number of cpu.process_ns samples after each.
struct Periods {
  std::vector<std::pair<int64_t, double>> set;  // (ts, ms)
  std::vector<size_t> samples;                 // cpu.process_ns samples under each
  std::vector<int64_t> min_gap_ns;             // the shortest gap between two of them
  std::vector<size_t> idle;                    // cpu.idle samples under each
  std::vector<int64_t> sample_ns;              // every cpu.process_ns sample's time
  int64_t step_ns = -1;
};

Periods periods(const std::string& file) {
  Periods p;
  reader::TraceReader r(file);
  reader::Event e;
  while (r.next(e)) {
    if (e.kind == uint8_t(Kind::kStep) && p.step_ns < 0) p.step_ns = e.ts_ns;
    if (e.kind != uint8_t(Kind::kCounter)) continue;
    const std::string_view n = r.string(e.name_id);
    if (n == "sampler.period_ms") {
      p.set.emplace_back(e.ts_ns, e.number());
      p.samples.push_back(0);
      p.min_gap_ns.push_back(INT64_MAX);
      p.idle.push_back(0);
    } else if (n == "cpu.process_ns" && !p.samples.empty()) {
      if (p.samples.back()++ > 0)
        p.min_gap_ns.back() = std::min(p.min_gap_ns.back(), e.ts_ns - p.sample_ns.back());
      p.sample_ns.push_back(e.ts_ns);
    } else if (n == "cpu.idle" && !p.idle.empty()) {
      ++p.idle.back();
    }
  }
  return p;
}

// Time of the first cpu.child_ns sample of `child` in `file`, or -1.
int64_t first_child_sample(const std::string& file, uint64_t child) {
  reader::TraceReader r(file);
  reader::Event e;
  while (r.next(e))
    if (e.kind == uint8_t(Kind::kCounter) && e.corr == child &&
        r.string(e.name_id) == "cpu.child_ns")
      return e.ts_ns;
  return -1;
}

// The child's first event: just after the fork.
int64_t fork_ns(const std::vector<std::string>& files, uint32_t child) {
  for (const auto& f : files) {
    Loaded l = load(f);
    if (l.header.pid != child) continue;
    int64_t t = INT64_MAX;
    for (const auto& e : l.events) t = std::min(t, e.ts_ns);
    return t;
  }
  return -1;
}

BOOST_AUTO_TEST_CASE(a_forked_worker_samples_slowly_until_it_records_a_step) {
  for (const bool slow : {true, false}) {
    BOOST_TEST_CONTEXT("worker period " << (slow ? "default" : "0 (as the parent)")) {
      TempDir d;
      auto env = env_for(d, {kNoLeakCheckInForks});
      if (!slow) env["STALLSCOPE_WORKER_SAMPLE_MS"] = "0";
      auto r = run_probe({"fork-worker", "400"}, env);
      BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                                      << "\n" << r.out << r.err);
      auto files = trace_files(d.path());
      BOOST_REQUIRE_EQUAL(files.size(), 2u);
      for (const auto& f : files) {
        const Periods p = periods(f);
        BOOST_REQUIRE(!p.set.empty());
        if (load(f).header.pid != uint32_t(r.value("child"))) {
          BOOST_TEST(p.set.size() == 1u);  // the parent: 10 ms throughout
          BOOST_TEST(p.set[0].second == 10.0);
          BOOST_TEST(p.idle[0] >= 1u);
          // It reads the child's CPU time from the tick after the fork, not
          // from its next regular listing (500 ms, some 50 ticks later;
          // counted in ticks, which a loaded machine delays but never adds).
          const int64_t first = first_child_sample(f, uint64_t(r.value("child")));
          BOOST_REQUIRE(first > 0);
          const int64_t forked = fork_ns(files, uint32_t(r.value("child")));
          const auto ticks = std::count_if(p.sample_ns.begin(), p.sample_ns.end(),
                                           [&](int64_t t) { return t > forked && t < first; });
          BOOST_TEST(ticks <= 2, ticks << " ticks between the fork and the child's first sample");
          continue;
        }
        // A period in force shows as two ticks closer than twice it: a
        // sampler skips a tick it is late for, never bursts, so at 100 ms
        // no two are 20 ms apart however loaded the machine is.
        if (!slow) {
          BOOST_TEST(p.set.size() == 1u);
          BOOST_TEST(p.set[0].second == 10.0);
          BOOST_TEST(p.samples[0] >= 2u);
          BOOST_TEST(p.min_gap_ns[0] < 20'000'000);
          continue;
        }
        BOOST_REQUIRE(p.set.size() == 2u);
        BOOST_TEST(p.set[0].second == 100.0);
        BOOST_TEST(p.set[1].second == 10.0);
        BOOST_REQUIRE(p.step_ns > 0);
        BOOST_TEST(p.set[1].first > p.step_ns);
        // 400 ms at 100 ms, then 400 ms at 10 ms (a loaded machine delays
        // ticks, never adds them).
        BOOST_TEST(p.samples[0] <= 7u);
        BOOST_TEST(p.samples[1] >= 2u);
        BOOST_TEST(p.min_gap_ns[1] < 20'000'000);
        // Idle CPUs are the parent's to report until the worker runs steps.
        BOOST_TEST(p.idle[0] == 0u);
        BOOST_TEST(p.idle[1] >= 1u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(control_file_switches_capture_and_marks_the_window_end) {
  TempDir d;
  auto r = run_probe({"control", d / "control", "500"}, env_for(d));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(r.value("toggled") == 1);
  Loaded l = load_single(d);
  BOOST_TEST(l.by_name["capture_on"] == 500u);
  BOOST_TEST(l.by_name["capture_off"] == 0u);
  BOOST_TEST(l.by_name["capture_on_again"] == 500u);
  // The capture hook heard both switches, each while capture was on.
  BOOST_TEST(r.value("hook_calls") == 2);
  BOOST_TEST(l.by_name["hook_off"] == 1u);
  BOOST_TEST(l.by_name["hook_on"] == 1u);
  size_t ends = 0, begins = 0;
  for (const auto& e : l.events)
    if (e.kind == uint8_t(Kind::kCapture)) (e.phase == format::kEnd ? ends : begins) += 1;
  BOOST_TEST(ends == 1u);
  BOOST_TEST(begins == 2u);  // at start, and when switched on again
}

BOOST_AUTO_TEST_CASE(control_end_completes_the_file_before_a_sigkill) {
  TempDir d;
  auto r = run_probe({"control-end", d / "control", "300"}, env_for(d));
  BOOST_TEST(r.term_signal == SIGKILL);
  BOOST_TEST(r.value("ended") == 1);
  Loaded l = load_single(d);
  BOOST_TEST((l.status == reader::Status::kComplete), l.error);
  BOOST_TEST(l.by_name["before_end"] == 300u);
  BOOST_TEST(l.by_name["after_end"] == 0u);  // tracing stopped with the file
}

BOOST_AUTO_TEST_CASE(names_files_and_run_directory_from_the_job) {
  TempDir d;
  auto r = run_probe({"threads", "1", "10"},
                     {{"STALLSCOPE_DIR", d.path()}, {"SLURM_JOB_ID", "77"},
                      {"SLURM_STEP_ID", "2"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto files = trace_files(d / "stallscope-77.2");
  BOOST_REQUIRE_EQUAL(files.size(), 1u);
  BOOST_TEST(files[0].find("-r3-") != std::string::npos);
  auto meta = nlohmann::json::parse(load(files[0]).metadata);
  BOOST_TEST(meta.at("rank").get<int>() == 3);
  BOOST_TEST(meta.at("rank_source").get<std::string>() == "RANK");
  BOOST_TEST(meta.at("world_size").get<int>() == 4);
  BOOST_TEST(meta.at("run_id_source").get<std::string>() == "SLURM");
}

BOOST_AUTO_TEST_CASE(bad_settings_are_reported_and_defaults_used) {
  TempDir d;
  auto r = run_probe({"threads", "1", "100"},
                     env_for(d, {{"STALLSCOPE_BUFFER_MB", "lots"},
                                 {"STALLSCOPE_MAX_MODE", "circular"}}));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(r.err.find("STALLSCOPE_BUFFER_MB='lots'") != std::string::npos);
  BOOST_TEST(r.err.find("STALLSCOPE_MAX_MODE='circular'") != std::string::npos);
  BOOST_TEST(load_single(d).by_name["work"] == 100u);
}

BOOST_AUTO_TEST_SUITE_END()
