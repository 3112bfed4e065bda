// Black-box: real trace files through analyze_paths() — a run directory
// with a trainer and its data worker merged by rank, cut and damaged files.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "analyzer/trace_files.hpp"
#include "stallscope/analyzer/analyzer.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::Part;
namespace an = stallscope::analyzer;

namespace {
double step_part_ms(const an::RankReport& r, size_t i, Part p) {
  return double(r.steps.at(i).parts[an::idx(p)]) / 1e6;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(report_files)

BOOST_AUTO_TEST_CASE(trainer_and_worker_processes_merge_into_one_rank) {
  TempDir dir;
  write_trainer(dir.file("h1-r0-4242.sst"), 6);
  write_worker(dir.file("h1-r0-4243.sst"), 6);
  const auto rep = an::analyze_paths({dir.path()}, {});
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  const auto& r = rep.ranks[0];
  BOOST_TEST(r.files.size() == 2u);
  BOOST_TEST(r.rank == 0);
  BOOST_REQUIRE_EQUAL(r.steps.size(), 6u);
  BOOST_TEST(r.trainer_tid == 100u);
  for (size_t i = 0; i < 6; ++i) {
    BOOST_TEST(step_part_ms(r, i, Part::kCompute) == 60.0);
    BOOST_TEST(step_part_ms(r, i, Part::kDataStorage) == 10.0);
    BOOST_TEST(step_part_ms(r, i, Part::kDataPreprocess) == 30.0);
  }
  BOOST_TEST(r.cause.find("input-bound: preprocessing") == 0u);
}

BOOST_AUTO_TEST_CASE(cut_file_is_analyzed_up_to_the_cut_with_a_warning) {
  TempDir dir;
  write_trainer(dir.file("a.sst"), 6, /*with_end=*/false);
  const auto rep = an::analyze_paths({dir.file("a.sst")}, {});
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  BOOST_TEST(rep.ranks[0].steps.size() == 6u);
  BOOST_TEST(rep.ranks[0].drops.files_truncated == 1u);
  bool warned = false;
  for (const auto& w : rep.ranks[0].warnings) warned = warned || w.find("truncated") != std::string::npos;
  BOOST_TEST(warned);
}

BOOST_AUTO_TEST_CASE(truncated_at_every_few_bytes_never_crashes) {
  TempDir dir;
  write_trainer(dir.file("full.sst"), 6);
  std::ifstream f(dir.file("full.sst"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  for (size_t cut = 0; cut < bytes.size(); cut += 37) {
    std::ofstream(dir.file("cut.sst"), std::ios::binary | std::ios::trunc).write(bytes.data(), long(cut));
    const auto rep = an::analyze_paths({dir.file("cut.sst")}, {});
    for (const auto& r : rep.ranks)
      for (const auto& s : r.steps) BOOST_REQUIRE_EQUAL(an::sum(s.parts), s.wall());
    if (cut < 96) BOOST_TEST(!rep.errors.empty());
  }
}

BOOST_AUTO_TEST_CASE(garbage_and_empty_files_are_errors_naming_the_file) {
  TempDir dir;
  std::ofstream(dir.file("empty.sst")).close();
  std::ofstream(dir.file("junk.sst")) << std::string(500, 'x');
  const auto rep = an::analyze_paths({dir.path()}, {});
  BOOST_TEST(rep.ranks.empty());
  BOOST_REQUIRE_EQUAL(rep.errors.size(), 2u);
  BOOST_TEST(rep.errors[0].find("empty.sst") != std::string::npos);
  BOOST_TEST(rep.errors[1].find("junk.sst") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bit_flips_in_a_chunk_keep_the_sound_part) {
  TempDir dir;
  write_trainer(dir.file("a.sst"), 6);
  std::fstream f(dir.file("a.sst"), std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-20, std::ios::end);
  f.put('\x7f');
  f.close();
  const auto rep = an::analyze_paths({dir.file("a.sst")}, {});
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  BOOST_TEST(rep.ranks[0].steps.size() == 6u);
  BOOST_TEST(rep.ranks[0].drops.files_error + rep.ranks[0].drops.files_truncated == 1u);
}

BOOST_AUTO_TEST_CASE(missing_path_is_an_error) {
  const auto rep = an::analyze_paths({"/nonexistent/run"}, {});
  BOOST_TEST(rep.ranks.empty());
  BOOST_TEST(!rep.errors.empty());
}

// A sparse run: its events span more than the lineage horizon before the
// step source is chosen. The first steps keep their device and trainer
// intervals (they were once trimmed and counted as host time).
namespace {

// 10 ms steps on the trainer's track (100 launches each: the analyzer reads
// events in batches of thousands), each with a 6 ms kernel on a device
// track; one chunk per 10 steps, the kernels' block after the trainer's (so
// kernels arrive up to 100 ms behind the newest step end). The kernels of
// steps [held, held + 10) are written `by` steps late.
void write_lagging(const std::string& path, int steps, int held, int by) {
  TraceBuilder b;
  b.metadata(R"({"rank":0,"host":"h1","affinity_count":4})");
  b.strings({{1, "trainer"}, {2, "gemm"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, fmt::TrackType::kGpuStream)});
  Records late;
  for (int c = 0; c * 10 < steps; ++c) {
    Records t, d;
    for (int i = c * 10; i < c * 10 + 10 && i < steps; ++i) {
      const uint64_t s = kBase + uint64_t(i) * 10 * kMs;
      add_step(t, uint64_t(i), s, 10 * kMs);
      for (uint64_t a = 0; a < 100; ++a) t.core(fmt::Kind::kApiCall, 0, s + a * 10000, 1000, 0, 0);
      auto k = ext_of<fmt::DeviceExt>(fmt::Ext::kDevice, 7);
      (i >= held && i < held + 10 ? late : d).core(fmt::Kind::kKernel, 0, s + 2 * kMs, 6 * kMs, 2, 0).ext(k);
    }
    if (c * 10 == held + by) b.events({{1, t}, {2, d}, {2, late}}); else b.events({{1, t}, {2, d}});
  }
  b.end();
  b.write(path);
}

}  // namespace

// The wait for late events adapts to how late they come: kernels that come
// at most 100 ms behind make it wait 4 × that, not the full 2 s, and a burst
// a second late after that is counted as late (with a warning). A fixed
// lag (adaptive_lag off) of 2 s keeps it.
BOOST_AUTO_TEST_CASE(the_lag_follows_the_lateness_seen_and_late_events_are_counted) {
  TempDir dir;
  write_lagging(dir.file("a.sst"), 400, 200, 100);
  an::AnalyzeOptions o;
  o.decide_events = 64;
  const auto adaptive = an::analyze_paths({dir.file("a.sst")}, o);
  o.adaptive_lag = false;
  const auto fixed = an::analyze_paths({dir.file("a.sst")}, o);
  for (const auto* rep : {&adaptive, &fixed}) {
    BOOST_REQUIRE_EQUAL(rep->ranks.size(), 1u);
    BOOST_REQUIRE_EQUAL(rep->ranks[0].steps.size(), 400u);
    BOOST_TEST(step_part_ms(rep->ranks[0], 150, Part::kCompute) == 6.0, boost::test_tools::tolerance(0.01));
  }
  BOOST_TEST(fixed.ranks[0].drops.late_events == 0u);
  BOOST_TEST(step_part_ms(fixed.ranks[0], 205, Part::kCompute) == 6.0, boost::test_tools::tolerance(0.01));
  BOOST_TEST(adaptive.ranks[0].drops.late_events == 10u);
  BOOST_TEST(step_part_ms(adaptive.ranks[0], 205, Part::kCompute) == 0.0);
  bool warned = false;
  for (const auto& w : adaptive.ranks[0].warnings) warned = warned || w.find("--lag") != std::string::npos;
  BOOST_TEST(warned);
  // Kernels a second late from the start: the wait stays at its 2 s maximum.
  write_lagging(dir.file("b.sst"), 400, 0, 100);
  o.adaptive_lag = true;
  const auto early = an::analyze_paths({dir.file("b.sst")}, o);
  BOOST_TEST(early.ranks[0].drops.late_events == 0u);
  BOOST_TEST(step_part_ms(early.ranks[0], 5, Part::kCompute) == 6.0, boost::test_tools::tolerance(0.01));
}

BOOST_AUTO_TEST_CASE(sparse_run_keeps_first_steps_before_step_source_is_chosen) {
  TempDir dir;
  constexpr int kSteps = 2000;  // 6000 events: more than one read batch of the analyzer
  write_trainer(dir.file("a.sst"), kSteps);
  an::AnalyzeOptions o;
  o.decide_events = size_t{1} << 20;  // chosen only at the end of the input
  o.lineage_horizon_ns = 200'000'000;  // 2 steps: the input spans 1000 horizons
  o.lag_ns = 10'000'000;
  const auto rep = an::analyze_paths({dir.file("a.sst")}, o);
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  const auto& r = rep.ranks[0];
  BOOST_REQUIRE_EQUAL(r.steps.size(), size_t(kSteps));
  int wrong = 0;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const bool ok = std::abs(step_part_ms(r, i, Part::kCompute) - 60.0) < 0.01 &&
                    std::abs(step_part_ms(r, i, Part::kDataUnknown) - 40.0) < 0.01;
    wrong += ok ? 0 : 1;
  }
  BOOST_TEST(wrong == 0);
  BOOST_TEST(step_part_ms(r, 0, Part::kCompute) == 60.0, boost::test_tools::tolerance(0.01));
}

// CUDA API calls recorded on behalf of the trainer thread by another thread
// (CUPTI delivers them on its own thread; the record carries the caller's
// tid on a track of its own): they count as the trainer's launch time.
BOOST_AUTO_TEST_CASE(api_calls_recorded_for_the_trainer_by_another_thread_are_its_launches) {
  TempDir dir;
  TraceBuilder b;
  b.header.pid = 4242;
  b.metadata(R"({"rank":0,"host":"h1","affinity_count":4})");
  b.strings({{1, "trainer"}, {2, "gemm"}, {3, "cudaLaunchKernel"}, {4, "cupti"}});
  // Track 3: the trainer's tid (100), written by the CUPTI thread.
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, fmt::TrackType::kGpuStream),
            thread_track(3, 100, 4), thread_track(4, 300, 4)});
  Records t, d, api, other;
  constexpr int kSteps = 8;
  for (int i = 0; i < kSteps; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    add_step(t, uint64_t(i), s, 100 * kMs);
    t.core(fmt::Kind::kDataWait, 0, s, 20 * kMs, 0, i + 1).ext(ext_of<fmt::WorkExt>(fmt::Ext::kWork, 1));
    // 20 ms of launches while the device idles, then 60 ms of kernels.
    for (int k = 0; k < 20; ++k) api.core(fmt::Kind::kApiCall, 0, s + (20 + k) * kMs, kMs, 3, 0);
    // API calls of an unrelated thread (another tid) are not the trainer's.
    other.core(fmt::Kind::kApiCall, 0, s + 90 * kMs, 5 * kMs, 3, 0);
    d.core(fmt::Kind::kKernel, 0, s + 40 * kMs, 60 * kMs, 2, 0).ext(ext_of<fmt::DeviceExt>(fmt::Ext::kDevice, 7));
  }
  b.events({{1, t}, {2, d}, {3, api}, {4, other}});
  b.end();
  b.write(dir.file("a.sst"));
  const auto rep = an::analyze_paths({dir.file("a.sst")}, {});
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  const auto& r = rep.ranks[0];
  BOOST_REQUIRE_EQUAL(r.steps.size(), size_t(kSteps));
  for (size_t i = 0; i < r.steps.size(); ++i) {
    BOOST_TEST(step_part_ms(r, i, Part::kHostLaunch) == 20.0, boost::test_tools::tolerance(0.01));
    BOOST_TEST(step_part_ms(r, i, Part::kCompute) == 60.0, boost::test_tools::tolerance(0.01));
    BOOST_TEST(step_part_ms(r, i, Part::kDataUnknown) == 20.0, boost::test_tools::tolerance(0.01));
  }
}

namespace {

// A trainer whose data comes from a memory-mapped file: the sampler counted
// `faults` major faults on the trainer thread; with `fault_reads`, the shim
// also recorded each as a storage read (cache_method 6).
an::Report mapped_run(const TempDir& dir, uint64_t faults, bool fault_reads) {
  TraceBuilder b;
  b.header.pid = 4242;
  b.metadata(R"({"rank":0,"host":"h1","affinity_count":4})");
  b.strings({{1, "trainer"}, {2, "faults.major"}, {3, "/data/train.arrow"}});
  b.tracks({thread_track(1, 100, 1)});
  Records t;
  for (int i = 0; i < 6; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    add_step(t, uint64_t(i), s, 100 * kMs);
    // Counter: the thread's cumulative major faults (value as stored, integer).
    t.core(fmt::Kind::kCounter, fmt::kInstant, s + 99 * kMs, faults * i / 5, 2, 100);
    if (fault_reads) {
      auto io = ext_of<fmt::IoExt>(fmt::Ext::kIo, 3);
      io.bytes = 4096;
      io.cache = static_cast<uint8_t>(fmt::Cache::kMiss);
      io.cache_method = static_cast<uint8_t>(fmt::CacheMethod::kFault);
      t.core(fmt::Kind::kStorageRead, fmt::kAsync, s + 10 * kMs, kMs / 10, 3, 100).ext(io);
    }
  }
  b.events({{1, t}});
  b.end();
  b.write(dir.file("a.sst"));
  return an::analyze_paths({dir.file("a.sst")}, {});
}

bool warned_faults(const an::RankReport& r) {
  for (const auto& w : r.warnings)
    if (w.find("major page fault") != std::string::npos) return true;
  return false;
}

}  // namespace

// Where page-fault sampling was refused, the sampler's per-thread counts are
// the only trace of mapped-file reads: the report says so, with the count.
BOOST_AUTO_TEST_CASE(untraced_major_faults_are_reported_as_reads_of_unknown_mapped_files) {
  TempDir a, b, c;
  const auto untraced = mapped_run(a, 500, false);
  BOOST_REQUIRE_EQUAL(untraced.ranks.size(), 1u);
  BOOST_TEST(warned_faults(untraced.ranks[0]));
  bool counted = false;
  for (const auto& w : untraced.ranks[0].warnings)
    counted = counted || w.find("500 major page fault(s) in 1 thread(s)") != std::string::npos;
  BOOST_TEST(counted);
  // Sampled faults were recorded as reads: nothing to add.
  BOOST_TEST(!warned_faults(mapped_run(b, 500, true).ranks.at(0)));
  // No faults: nothing to say.
  BOOST_TEST(!warned_faults(mapped_run(c, 0, false).ranks.at(0)));
}

// The DataLoader hooks' files: the worker's sample spans join the trainer's
// hand-offs by the worker's pid and the batch index, across the two files.
BOOST_AUTO_TEST_CASE(dataloader_worker_file_joins_the_trainer_by_pid_and_batch) {
  TempDir dir;
  write_dataloader_run(dir.file("h1-r0-5252.sst"), dir.file("h1-r0-5253.sst"));
  const auto rep = an::analyze_paths({dir.path()}, {});
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  const auto& r = rep.ranks[0];
  BOOST_REQUIRE_EQUAL(r.steps.size(), 6u);
  BOOST_TEST((r.split & an::kSplitExact) != 0);
  for (size_t i = 0; i < 6; ++i) {
    BOOST_TEST(step_part_ms(r, i, Part::kDataStorage) == 10.0, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(step_part_ms(r, i, Part::kDataPreprocess) == 29.9, boost::test_tools::tolerance(1e-9));
    BOOST_TEST(step_part_ms(r, i, Part::kDataHandoff) == 0.1, boost::test_tools::tolerance(1e-9));
  }
  BOOST_REQUIRE_EQUAL(r.dataloaders.size(), 1u);
  const auto& l = r.dataloaders[0];
  BOOST_TEST(l.site == "/home/u/train.py:42");
  BOOST_TEST(l.collate == "default_collate");
  BOOST_TEST(l.pin_memory == "inactive");
  BOOST_TEST(l.batches == 6u);
  BOOST_REQUIRE_EQUAL(l.workers.size(), 1u);
  BOOST_TEST(l.workers[0].pid == 5253u);
  BOOST_TEST(l.split.storage_ms == 60.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(l.split.collate_ms == 54.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(l.split.handoff_ms == 0.6, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(l.fetch_ms == 39.9, boost::test_tools::tolerance(1e-9));
  BOOST_REQUIRE_EQUAL(l.epochs.size(), 1u);
  BOOST_TEST(l.epochs[0].startup_ms == 41.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST((r.command == std::vector<std::string>{"python3", "train.py", "--lr", "0.1"}));
}

BOOST_AUTO_TEST_SUITE_END()
