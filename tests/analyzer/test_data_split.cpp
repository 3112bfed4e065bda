// The data-stall split: the backward walk along the late batch's chain, and
// the inferred split when lineage is missing (hand-computed, ms).
#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::Part;

BOOST_AUTO_TEST_SUITE(data_split)

BOOST_AUTO_TEST_CASE(slow_read_is_storage) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  b.step(0, 0, 100).wait(0, 50, 1).kernel(50, 100);
  b.read(w, 0, 45, 1).pre(w, 45, 49, 1).ready(w, 50, 1, {1});
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 45.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 5.0);
  BOOST_TEST((r.steps[0].split & stallscope::analyzer::kSplitLineage) != 0);
}

BOOST_AUTO_TEST_CASE(serial_worker_interleaving_reads_and_decodes_follows_the_chain) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  std::vector<uint64_t> samples;
  for (uint64_t i = 0; i < 32; ++i) {
    b.read(w, 10.0 * i, 10.0 * i + 1, i + 1).pre(w, 10.0 * i + 1, 10.0 * i + 10, i + 1);
    samples.push_back(i + 1);
  }
  b.ready(w, 320, 7, samples).step(0, 0, 330).wait(0, 320, 7).kernel(320, 330);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 32.0);   // 10 %
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 288.0);  // 90 %
}

BOOST_AUTO_TEST_CASE(queued_read_waiting_for_submission_is_storage) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  b.step(0, 0, 100).wait(0, 40, 1).kernel(40, 100);
  b.read(w, 10, 30, 1, /*queued_ms=*/10).pre(w, 30, 40, 1).ready(w, 40, 1, {1});
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 30.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 10.0);
}

BOOST_AUTO_TEST_CASE(busy_worker_pool_is_preprocessing) {
  RankBuilder b;
  const uint32_t w = b.thread(200), io = b.thread(201);
  b.step(0, 0, 100).wait(0, 40, 1).kernel(40, 100);
  b.read(io, 0, 5, 1).pre(w, 0, 30, 100).pre(w, 30, 40, 1).ready(w, 40, 1, {1});
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 0.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 40.0);
}

// The worker was busy reading another sample when the batch's sample (read
// long before, elsewhere) could have been decoded: the chain goes through
// the worker's previous item, step after step.
BOOST_AUTO_TEST_CASE(busy_worker_chain_follows_the_thread_in_every_step) {
  RankBuilder b;
  const uint32_t w = b.thread(200), io = b.thread(201);
  for (int i = 0; i < 6; ++i) {
    const double s = 100.0 * i;
    const uint64_t early = 100 + uint64_t(i), late = 1 + uint64_t(i);
    b.read(io, s - 95, s - 90, late);                         // read long before
    b.read(w, s, s + 45, early).pre(w, s + 45, s + 90, late);  // busy reading `early` until 45
    b.ready(w, s + 90, uint64_t(i) + 1, {late});
    b.step(uint64_t(i), s, s + 100).wait(s + 40, s + 90, uint64_t(i) + 1).kernel(s, s + 40).kernel(s + 90, s + 100);
  }
  const auto r = b.analyze();
  BOOST_REQUIRE_EQUAL(r.steps.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    BOOST_TEST(part_ms(r, i, Part::kDataStorage) == 5.0, "step " << i);        // [40, 45)
    BOOST_TEST(part_ms(r, i, Part::kDataPreprocess) == 45.0, "step " << i);    // [45, 90)
  }
}

BOOST_AUTO_TEST_CASE(batch_found_by_time_when_wait_has_no_batch_id) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  b.step(0, 0, 100).wait(0, 50).kernel(50, 100);
  b.read(w, 0, 20, 1).pre(w, 20, 50, 1).ready(w, 50, 9, {1});
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 20.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 30.0);
}

BOOST_AUTO_TEST_CASE(without_lineage_split_is_inferred_from_producers) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  b.step(0, 0, 100).wait(0, 50).kernel(50, 100);
  b.read(w, 0, 20, 0).pre(w, 20, 40, 0);  // no sample ids, no batch_ready
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 20.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 20.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataUnknown) == 10.0);
  BOOST_TEST((r.steps[0].split & stallscope::analyzer::kSplitInferred) != 0);
}

// Reads and preprocessing that name samples, but no batch to walk from: the
// split is inferred from the same items (kept once, for the lineage), read
// from their submission (queue wait included), on two producer threads.
BOOST_AUTO_TEST_CASE(without_a_batch_split_is_inferred_from_sample_items) {
  RankBuilder b;
  const uint32_t w = b.thread(200), io = b.thread(201);
  b.step(0, 0, 100).wait(0, 50).kernel(50, 100);
  b.read(io, 5, 15, 1, /*queued_ms=*/5).pre(w, 20, 30, 1);  // storage [0, 15), preprocessing [20, 30)
  b.read(io, 25, 35, 2).pre(w, 40, 60, 2);                  // storage [25, 35), preprocessing [40, 50) of the wait
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataStorage) == 25.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 15.0);  // [20, 25) and [40, 50)
  BOOST_TEST(part_ms(r, 0, Part::kDataUnknown) == 10.0);     // [15, 20) and [35, 40)
  BOOST_TEST((r.steps[0].split & stallscope::analyzer::kSplitInferred) != 0);
}

BOOST_AUTO_TEST_CASE(inferred_split_uses_producer_cpu_samples) {
  RankBuilder b;
  b.step(0, 0, 100).wait(0, 50).kernel(50, 100);
  // A producer thread (tid 300) on CPU 30 ms during [10, 40): samples every 10 ms.
  for (int t = 10; t <= 40; t += 10) b.counter("cpu.thread_ns", t, (t - 10) * 1e6, 300);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 30.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataUnknown) == 20.0);
}

// A forked worker (pid 200) is read twice: by its own sampler (thread 201)
// and by its parent's, as a child. Its CPU time counts once: the parent's
// reading from its first sample on, the worker's own before it (a parent
// finds a new child only at its next listing).
BOOST_AUTO_TEST_CASE(inferred_split_counts_a_forked_workers_cpu_once) {
  for (const int parent_from : {10, 30, -1}) {  // first parent reading at 10 ms, 30 ms, never
    BOOST_TEST_CONTEXT("parent reads the worker from " << parent_from) {
      RankBuilder b;
      b.step(0, 0, 100).wait(0, 50).kernel(50, 100);
      const uint32_t w = b.proc(200, 100);
      for (int t = 10; t <= 40; t += 10) {
        b.counter("cpu.thread_ns", t, (t - 10) * 1e6, 201, w);
        if (parent_from >= 0 && t >= parent_from) b.counter("cpu.child_ns", t, (t - 10) * 1e6, 200);
      }
      const auto r = b.analyze();
      BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == 30.0);
      BOOST_TEST(part_ms(r, 0, Part::kDataUnknown) == 20.0);
    }
  }
}

// A worker's sampler runs at 100 ms (sampler.period_ms): each increase of
// its cumulative counters is spread over 100 ms, not the rank's 10 ms.
BOOST_AUTO_TEST_CASE(cumulative_counters_follow_each_processs_sampler_period) {
  for (const bool announced : {true, false}) {
    BOOST_TEST_CONTEXT("period announced: " << announced) {
      RankBuilder b;
      b.step(0, 0, 300).wait(0, 150).kernel(150, 300);
      const uint32_t w = b.proc(200, 1);
      if (announced) b.counter("sampler.period_ms", 0, 100, 0, w);
      // Thread 201 on CPU half the time: 50 ms in each 100 ms.
      for (int t = 0; t <= 200; t += 100) b.counter("cpu.thread_ns", t, t * 0.5e6, 201, w);
      const auto r = b.analyze();
      // Announced: [0, 150) holds 50 + 25 ms of its CPU. Not announced,
      // each 50 ms lands in the last 10 ms before its sample: 50 ms.
      BOOST_TEST(part_ms(r, 0, Part::kDataPreprocess) == (announced ? 75.0 : 50.0));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
