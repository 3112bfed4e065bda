// White-box tests of the attribution core through analyze_rank(): each part
// alone and in combination, with hand-computed expectations (ms).
#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::Part;
using stallscope::analyzer::StepSource;

BOOST_AUTO_TEST_SUITE(attribution)

BOOST_AUTO_TEST_CASE(compute_only_fills_the_step) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 100);
  const auto r = b.analyze();
  BOOST_REQUIRE_EQUAL(r.steps.size(), 1u);
  BOOST_TEST(part_ms(r, 0, Part::kCompute) == 100.0);
  BOOST_TEST(r.compute_basis == "device");
}

BOOST_AUTO_TEST_CASE(overlapping_compute_and_communication_counts_once) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 60).collective(40, 90).kernel(90, 100);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kCompute) == 70.0);
  BOOST_TEST(part_ms(r, 0, Part::kCommTransfer) == 30.0);
  BOOST_TEST(part_ms(r, 0, Part::kStragglerWait) == 0.0);
}

BOOST_AUTO_TEST_CASE(h2d_hidden_behind_compute_is_not_exposed) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 100).copy(Kind::kH2D, 10, 30);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kCopyH2D) == 0.0);
  BOOST_TEST(part_ms(r, 0, Part::kCompute) == 100.0);
}

BOOST_AUTO_TEST_CASE(h2d_partly_exposed_and_other_device_work) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 50).copy(Kind::kH2D, 40, 70).copy(Kind::kMemset, 65, 75).kernel(80, 100);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kCompute) == 70.0);
  BOOST_TEST(part_ms(r, 0, Part::kCopyH2D) == 20.0);
  BOOST_TEST(part_ms(r, 0, Part::kCopyOther) == 5.0);
  BOOST_TEST(part_ms(r, 0, Part::kHostCpu) == 5.0);  // no CPU samples: counted on-CPU
}

BOOST_AUTO_TEST_CASE(blocking_sync_then_host_work_is_host_after_sync) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 40).sync(10, 40).api(55, 60).kernel(60, 100);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kHostAfterSync) == 20.0);
  BOOST_TEST(part_ms(r, 0, Part::kHostLaunch) == 0.0);
  BOOST_TEST(part_ms(r, 0, Part::kCompute) == 80.0);
}

BOOST_AUTO_TEST_CASE(d2h_return_starts_host_after_sync) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 40).copy(Kind::kD2H, 40, 50).kernel(70, 100);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kCopyOther) == 10.0);
  BOOST_TEST(part_ms(r, 0, Part::kHostAfterSync) == 20.0);
}

BOOST_AUTO_TEST_CASE(launch_and_cpu_and_blocked_split_the_remaining_host_time) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 40).api(40, 45).kernel(65, 100);
  // Trainer (tid 100) uses 5 ms of CPU in [45, 55): sampled at 55.
  b.counter("cpu.thread_ns", 1, 0, 100).counter("cpu.thread_ns", 55, 5e6, 100);
  const auto r = b.analyze();
  BOOST_TEST(part_ms(r, 0, Part::kHostLaunch) == 5.0);
  BOOST_TEST(part_ms(r, 0, Part::kHostCpu) == 5.0);
  BOOST_TEST(part_ms(r, 0, Part::kHostBlocked) == 15.0);
}

BOOST_AUTO_TEST_CASE(rank_without_device_counts_trainer_cpu_as_compute) {
  RankBuilder b;
  b.t.tracks[b.device].type = stallscope::format::TrackType::kThread;  // no GPU at all
  b.step(0, 0, 100).wait(0, 20);
  b.counter("cpu.thread_ns", 20, 0, 100);
  for (int t = 30; t <= 100; t += 10) b.counter("cpu.thread_ns", t, (t - 20) * 0.75e6, 100);
  const auto r = b.analyze();
  BOOST_TEST(r.compute_basis == "cpu_only");
  BOOST_TEST(part_ms(r, 0, Part::kCompute) == 60.0);
  BOOST_TEST(part_ms(r, 0, Part::kHostBlocked) == 20.0);
  BOOST_TEST(part_ms(r, 0, Part::kDataUnknown) == 20.0);
}

BOOST_AUTO_TEST_CASE(api_calls_without_device_work_say_gpu_not_recorded) {
  RankBuilder b;
  b.step(0, 0, 100).api(10, 20);
  const auto r = b.analyze();
  BOOST_TEST(r.compute_basis == "gpu_not_recorded");
  BOOST_TEST(part_ms(r, 0, Part::kHostLaunch) == 10.0);
}

BOOST_AUTO_TEST_CASE(emulated_device_work_counts_as_device_busy) {
  RankBuilder b;
  b.step(0, 0, 100).kernel(0, 100);
  b.t.events.back().emulated = true;
  b.t.tracks[b.device].type = stallscope::format::TrackType::kEmulated;
  BOOST_TEST(part_ms(b.analyze(), 0, Part::kCompute) == 100.0);
}

// An NCCL call recorded on the trainer thread (kCollEnqueued) is the time
// the trainer spent enqueuing the collective: host launch time, not
// transfer. A host-side collective without the flag (a blocking call, or an
// older trace) stays communication.
BOOST_AUTO_TEST_CASE(an_enqueued_collective_on_the_trainer_is_launch_time_not_transfer) {
  for (const bool enqueued : {true, false}) {
    BOOST_TEST_CONTEXT("enqueued " << enqueued) {
      RankBuilder b;
      b.step(0, 0, 100).kernel(0, 40).kernel(60, 100);
      b.add(Kind::kCollective, b.trainer, 40, 50);
      b.t.events.back().coll().enqueued = enqueued;
      b.t.events.back().coll().comm = 7;
      b.t.events.back().coll().seq = 1;
      const auto r = b.analyze();
      BOOST_TEST(part_ms(r, 0, Part::kHostLaunch) == (enqueued ? 10.0 : 0.0));
      BOOST_TEST(part_ms(r, 0, Part::kCommTransfer) == (enqueued ? 0.0 : 10.0));
      BOOST_TEST(part_ms(r, 0, Part::kCompute) == 80.0);
    }
  }
  // NCCL calls and nothing from the device: GPU activity was not recorded.
  RankBuilder b;
  b.t.tracks[b.device].type = stallscope::format::TrackType::kThread;
  b.step(0, 0, 100).add(Kind::kCollective, b.trainer, 40, 50);
  b.t.events.back().coll().enqueued = true;
  BOOST_TEST(b.analyze().compute_basis == "gpu_not_recorded");
}

BOOST_AUTO_TEST_SUITE_END()
