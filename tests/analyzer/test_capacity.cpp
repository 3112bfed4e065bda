// Capacity model, root cause and remedies on hand-built ranks: too few
// workers with idle CPUs, a rank whose affinity allows one CPU, pageable
// copies, per-step syncs, a healthy compute-bound rank.
#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::Part;
using stallscope::analyzer::RankReport;
using stallscope::analyzer::Remedy;
using stallscope::analyzer::idx;

namespace {

const Remedy* find(const RankReport& r, const std::string& id) {
  for (const auto& m : r.remedies) if (m.id == id) return &m;
  return nullptr;
}

// 8 steps of 100 ms: the trainer waits 50 ms for a batch that one worker
// preprocesses in 90 ms; then 50 ms of compute. CPUs: `affinity` usable,
// `idle` idle during the run, the rank uses one core.
RankBuilder preprocess_bound(int affinity, double idle) {
  RankBuilder b;
  b.t.procs[0].affinity_cpus = affinity;
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= 8; ++i) {
    const double s = 100.0 * i;
    b.step(i, s, s + 100).wait(s, s + 50, i).kernel(s + 50, s + 90);
    b.pre(w, s - 40, s + 50, i).ready(w, s + 50, i, {uint64_t(i)});
  }
  for (int t = 0; t <= 900; t += 10) {
    b.counter("cpu.idle", t, idle).counter("cpu.process_ns", t, t * 1e6);
  }
  return b;
}

// 8 steps of 100 ms: the trainer waits 60 ms for a batch whose one read
// takes 60 ms; reads carry queue depth `qd` (0 = not recorded).
RankBuilder storage_bound(uint16_t qd) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= 8; ++i) {
    const double s = 100.0 * i;
    b.step(i, s, s + 100).wait(s, s + 60, i).kernel(s + 60, s + 95);
    b.read(w, s - 5, s + 60, uint64_t(i));
    b.t.events.back().io().queue_depth = qd;
    b.ready(w, s + 60, i, {uint64_t(i)});
  }
  return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(capacity)

BOOST_AUTO_TEST_CASE(queue_depth_remedy_needs_a_recorded_queue_depth) {
  const auto unknown = storage_bound(0).analyze();
  BOOST_TEST(unknown.parts[idx(Part::kDataStorage)].share > 0.5);
  BOOST_TEST(find(unknown, "raise_queue_depth") == nullptr);
  const auto shallow = storage_bound(1).analyze();
  BOOST_TEST(find(shallow, "raise_queue_depth") != nullptr);
}

// The preload shim classifies one small read in N: the misses are scaled
// up from the classified reads, never counted from unclassified ones.
BOOST_AUTO_TEST_CASE(cache_misses_are_estimated_from_the_classified_reads) {
  RankBuilder b = storage_bound(0);
  // 8 reads of 4096 B: one a miss, one a hit, six unclassified.
  size_t n = 0;
  for (auto& e : b.t.events) {
    if (e.kind != Kind::kStorageRead) continue;
    e.io().cache = n == 0   ? stallscope::format::Cache::kMiss
                   : n == 1 ? stallscope::format::Cache::kHit
                            : stallscope::format::Cache::kUnknown;
    ++n;
  }
  BOOST_REQUIRE(n == 8u);
  const auto r = b.analyze();
  using stallscope::analyzer::Fig;
  using stallscope::analyzer::StageKind;
  const stallscope::analyzer::Stage* st = nullptr;
  for (const auto& s : r.stages) if (s.kind == StageKind::kStorage) st = &s;
  BOOST_REQUIRE(st != nullptr);
  BOOST_TEST(st->figure(Fig::kCacheClassifiedBytes).value_or(-1) == 8192.0);
  BOOST_TEST(st->figure(Fig::kCacheMissBytes).value_or(-1) == 16384.0);  // half of 8 × 4096
  // Nothing classified: no estimate.
  const auto none = storage_bound(0).analyze();
  for (const auto& s : none.stages) BOOST_TEST(!s.figure(Fig::kCacheMissBytes).has_value());
}

BOOST_AUTO_TEST_CASE(too_few_workers_on_idle_cpus_proposes_more_workers) {
  const auto r = preprocess_bound(4, 3).analyze();
  BOOST_TEST_MESSAGE(r.summary);
  BOOST_TEST(r.steady_steps == 7u);
  BOOST_TEST(r.bottleneck == "preprocessing");
  BOOST_TEST(r.cause.find("input-bound: preprocessing 50 %") == 0u);
  const Remedy* m = find(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->predicted_step_ms == 62.5, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(!m->bound);
  BOOST_TEST(find(r, "cache_decoded") == nullptr);
  BOOST_TEST(r.cpu.budget_cores == 4.0);
  BOOST_TEST(r.cpu.used_cores == 1.0, boost::test_tools::tolerance(0.02));
}

BOOST_AUTO_TEST_CASE(rank_with_one_cpu_gets_no_more_workers_but_cache_decoded) {
  const auto r = preprocess_bound(1, 0).analyze();
  BOOST_TEST(r.cpu.budget_cores == 1.0);
  BOOST_TEST(find(r, "more_workers") == nullptr);
  const Remedy* m = find(r, "cache_decoded");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->bound);
  BOOST_TEST(m->predicted_step_ms == 50.0, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(pageable_copies_use_the_probe_pinned_bandwidth) {
  RankBuilder b;
  b.t.probes.pinned_gbps = 24;
  for (int i = 0; i < 6; ++i) {
    const double s = 100.0 * i;
    // 80 MB pageable in 20 ms = 4 GB/s; pinned 24 GB/s -> 20 * (1 - 4/24) saved.
    b.step(i, s, s + 100).copy(Kind::kH2D, s, s + 20, 80'000'000, false).kernel(s + 20, s + 100);
  }
  const auto r = b.analyze();
  const Remedy* m = find(r, "pinned_memory");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->inputs_from == "probe:device_model");
  BOOST_TEST(m->predicted_step_ms == 100 - 20 * (1 - 4.0 / 24), boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(per_step_sync_predicts_idle_minus_launch) {
  RankBuilder b;
  for (int i = 0; i < 6; ++i) {
    const double s = 100.0 * i;
    b.step(i, s, s + 100).kernel(s, s + 60).sync(s + 40, s + 60).kernel(s + 90, s + 100);
    b.api(s + 85, s + 90);
  }
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 3, Part::kHostAfterSync) == 30.0);
  const Remedy* m = find(r, "avoid_sync");
  BOOST_REQUIRE(m != nullptr);
  // The call launching the kernel that ends the sync's gap stays: without
  // the sync the host must still launch it (30 ms idle, 5 ms of it launch).
  BOOST_TEST(m->predicted_step_ms == 75.0, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(compute_bound_is_healthy) {
  RankBuilder b;
  for (int i = 0; i < 6; ++i) b.step(i, 100.0 * i, 100.0 * i + 100).kernel(100.0 * i, 100.0 * i + 95);
  const auto r = b.analyze();
  BOOST_TEST(r.cause == "compute-bound (healthy)");
  BOOST_REQUIRE(!r.remedies.empty());
  BOOST_TEST(r.remedies[0].id == "healthy");
}

BOOST_AUTO_TEST_SUITE_END()
