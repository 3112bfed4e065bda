// Pipelines without hooks (docs/attach-preload.md "Hand-offs"): steps from
// the hand-offs to the trainer thread, blocking or not; several objects per
// step; relays; locks handed both ways are no hand-offs; the producer stage.
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"
#include "stallscope/analyzer/render.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::StageKind;
using stallscope::analyzer::StepSource;
namespace fmt = stallscope::format;

namespace {

const stallscope::analyzer::Stage* stage(const stallscope::analyzer::RankReport& r, StageKind k) {
  for (const auto& s : r.stages) if (s.kind == k) return &s;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(feed)

// The queue is always full: every get returns at once, no data wait is
// recorded, and the hand-offs still make one step each.
BOOST_AUTO_TEST_CASE(a_trainer_that_never_waits_has_steps_from_its_handoffs) {
  RankBuilder b;
  const uint32_t w1 = b.worker_thread(201), w2 = b.worker_thread(202);
  (void)w1;
  (void)w2;
  for (int i = 0; i < 20; ++i) {
    const double at = 20.0 * i;
    b.channel_handoff(b.trainer, at - 5, at + 0.05, at, i % 2 ? 202 : 201, i % 2 ? 202 : 201);
  }
  b.add(Kind::kRange, b.trainer, 400, 401);  // the run's last activity
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.steps.size() == 20u);
  BOOST_TEST(r.steps[3].start_ns == ms(60));
  BOOST_TEST(r.steps[3].end_ns == ms(80));
  BOOST_TEST(r.cause.rfind("compute-bound", 0) == 0, r.cause);
  BOOST_TEST(r.feed.found);
  BOOST_TEST(r.feed.producers.size() == 2u);
  BOOST_TEST(r.feed.producers[0].tid == 0u);  // whole processes
  BOOST_TEST(r.feed.channel == "multiprocessing queue");
  BOOST_TEST(r.feed.items_per_step == 1.0, boost::test_tools::tolerance(0.01));
  const auto* st = stage(r, StageKind::kProducers);
  BOOST_REQUIRE(st != nullptr);
  BOOST_TEST(st->measured);
  BOOST_TEST(st->workers == 2.0);
}

// Inputs and labels as two messages, 50 µs apart: one step per pair.
BOOST_AUTO_TEST_CASE(objects_taken_together_make_one_step) {
  RankBuilder b;
  for (int i = 0; i < 12; ++i) {
    const double at = 10.0 * i;
    b.channel_handoff(b.trainer, at - 1, at + 0.01, at, 300, 301);
    b.channel_handoff(b.trainer, at - 1, at + 0.06, at + 0.05, 300, 301);
  }
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.steps.size() == 12u);
  BOOST_TEST(r.steps[2].start_ns == ms(20));
  BOOST_TEST(r.steps[2].end_ns == ms(30));
  BOOST_TEST(r.feed.items_per_step == 2.0, boost::test_tools::tolerance(0.01));
  BOOST_TEST(r.source_detail.find("group") != std::string::npos, r.source_detail);
}

// Pool.imap: the workers' results reach the pool's result thread over a
// queue; it wakes the trainer through a semaphore. The trainer's steps come
// from its own hand-offs; the producers are the workers, the result thread
// a relay.
BOOST_AUTO_TEST_CASE(a_relay_stands_between_the_workers_and_the_trainer) {
  RankBuilder b;
  const uint32_t relay = b.thread(150);
  b.worker_thread(401);
  b.worker_thread(402);
  b.worker_thread(403);
  RankBuilder::HandoffOpts sem{.type = fmt::ChannelType::kSemaphore, .channel = 0xabc0, .bytes = 0};
  for (int i = 0; i < 15; ++i) {
    const double at = 30.0 * i;
    b.channel_handoff(relay, at + 5, at + 20, at + 1, 401 + i % 3, 401 + i % 3);
    b.channel_handoff(b.trainer, at + 20.1, at + 20.2, at, 100, 150, sem);
    b.wait(at, at + 20.2);
  }
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.trainer_tid == 100u);
  BOOST_TEST(r.steps.size() == 15u);
  BOOST_TEST(r.feed.producers.size() == 3u);
  BOOST_REQUIRE(r.feed.relays.size() == 1u);
  BOOST_TEST(r.feed.relays[0].tid == 150u);
  BOOST_TEST(r.feed.channel == "semaphore");
  BOOST_TEST(r.feed.path.find("3 processes -> multiprocessing queue -> thread 150") == 0, r.feed.path);
  BOOST_TEST(r.cause.rfind("input-bound", 0) == 0, r.cause);
}

// A condition variable two threads hand each other (the interpreter's GIL,
// a shared lock): no hand-off of data, no steps from it.
BOOST_AUTO_TEST_CASE(an_object_handed_both_ways_is_no_handoff) {
  RankBuilder b;
  const uint32_t other = b.thread(160);
  RankBuilder::HandoffOpts gil{.type = fmt::ChannelType::kCondVar, .channel = 0x6110, .bytes = 0};
  for (int i = 0; i < 20; ++i) {
    const double at = 5.0 * i;
    if (i % 2) b.channel_handoff(b.trainer, at, at + 0.1, at - 2, 100, 160, gil);
    else b.channel_handoff(other, at, at + 0.1, at - 2, 100, 100, gil);
  }
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) != static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.steps.size() <= 1u);
  BOOST_TEST(!r.feed.found);
}

// A bounded queue: the loader waits for free slots the trainer signals, the
// trainer for items the loader signals. The trainer is the main thread.
BOOST_AUTO_TEST_CASE(in_a_bounded_queue_the_main_thread_is_the_trainer) {
  RankBuilder b;
  const uint32_t loader = b.thread(170);
  RankBuilder::HandoffOpts not_empty{.type = fmt::ChannelType::kCondVar, .channel = 0x100, .bytes = 0};
  RankBuilder::HandoffOpts not_full{.type = fmt::ChannelType::kCondVar, .channel = 0x200, .bytes = 0};
  for (int i = 0; i < 16; ++i) {
    const double at = 10.0 * i;
    b.channel_handoff(b.trainer, at + 4, at + 4.1, at, 100, 170, not_empty);
    b.channel_handoff(loader, at + 4.2, at + 4.3, at + 1, 100, 100, not_full);
    b.channel_handoff(loader, at + 6, at + 6.1, at + 5, 100, 100, not_full);
  }
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.trainer_tid == 100u);
  BOOST_TEST(r.steps.size() == 16u);
  BOOST_REQUIRE(r.feed.producers.size() == 1u);
  BOOST_TEST(r.feed.producers[0].tid == 170u);
  BOOST_TEST(r.feed.relays.empty());
}

// A writer the shim did not see (pid and tid 0): the hand-offs still make
// steps, but name no producer.
BOOST_AUTO_TEST_CASE(an_unknown_writer_is_no_producer) {
  RankBuilder b;
  for (int i = 0; i < 10; ++i) b.channel_handoff(b.trainer, 10.0 * i, 10.0 * i + 1, 10.0 * i, 0, 0);
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.feed.found);
  BOOST_TEST(r.feed.handoffs == 10u);
  BOOST_TEST(r.feed.producers.empty());
  BOOST_TEST(r.feed.path == "writers not seen -> multiprocessing queue -> trainer");
}

// Step events win: the hand-offs only describe the producers.
BOOST_AUTO_TEST_CASE(step_events_win_over_handoffs) {
  RankBuilder b;
  for (int i = 0; i < 6; ++i) {
    b.step(i, 40.0 * i, 40.0 * i + 40);
    b.channel_handoff(b.trainer, 40.0 * i, 40.0 * i + 1, 40.0 * i, 100, 180);
    b.channel_handoff(b.trainer, 40.0 * i + 20, 40.0 * i + 21, 40.0 * i + 20, 100, 180);
  }
  b.thread(180);
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kStepEvents));
  BOOST_TEST(r.steps.size() == 6u);
  BOOST_TEST(r.feed.items_per_step == 2.0, boost::test_tools::tolerance(0.01));
}

// Two forked workers, each 30 ms of CPU per item, feed a trainer that works
// 10 ms per step: the step is 15 ms, a third of it waiting. Three workers
// keep up (Little's law): the remedy says so, with the step it predicts.
BOOST_AUTO_TEST_CASE(producers_that_do_not_keep_up_get_more_workers) {
  RankBuilder b;
  const uint32_t w1 = b.worker_thread(201), w2 = b.worker_thread(202);
  const int steps = 40;
  for (int i = 0; i < steps; ++i) {
    const double at = 15.0 * i;
    b.wait(at, at + 5);
    b.channel_handoff(b.trainer, at + 4.9, at + 5, at, i % 2 ? 202 : 201, i % 2 ? 202 : 201);
  }
  // Each worker's process CPU clock: 30 ms per item it made.
  for (int k = 1; k <= steps / 2; ++k) {
    b.counter("cpu.process_ns", 30.0 * k, 30e6 * k, 0, w1 - 1);
    b.counter("cpu.process_ns", 30.0 * k + 1, 30e6 * k, 0, w2 - 1);
  }
  b.add(Kind::kRange, b.trainer, 15.0 * steps - 1, 15.0 * steps);  // the last step's work
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
  BOOST_TEST(r.cause.rfind("input-bound", 0) == 0, r.cause);
  BOOST_TEST(r.feed.producers.size() == 2u);
  BOOST_TEST(r.feed.cpu_ms_per_item == 30.0, boost::test_tools::tolerance(0.05));
  BOOST_REQUIRE(!r.remedies.empty());
  const auto& m = r.remedies.front();
  BOOST_TEST(m.id == "more_workers");
  BOOST_TEST(m.title == "Add producer processes");
  BOOST_TEST(m.pytorch_knob.find("3 producer processes") == 0, m.pytorch_knob << " / " << m.evidence);
  BOOST_TEST(m.predicted_step_ms == 10.0, boost::test_tools::tolerance(0.05));
  BOOST_TEST(!m.bound);  // within 4x the producers: Little's law's own count
  // The setting is the program's own, not torch's: labelled so.
  BOOST_TEST(m.knob_for == "program");
  stallscope::analyzer::Report rep;
  rep.ranks.push_back(r);
  std::ostringstream text;
  stallscope::analyzer::write_text(text, rep, {});
  BOOST_TEST(text.str().find("program: 3 producer processes") != std::string::npos, text.str());
  BOOST_TEST(text.str().find("PyTorch: 3 producer") == std::string::npos);
}

// Two workers each blocked 99 ms per item elsewhere (a remote service, a
// sleep) and 1 ms on CPU, a trainer that works 1 ms per step: Little's law
// asks for 100 producers. The remedy proposes at most 4x today's (8), says
// Little's law asked for more, and its prediction at 8 is a bound.
BOOST_AUTO_TEST_CASE(producers_blocked_elsewhere_get_at_most_four_times_as_many) {
  RankBuilder b;
  const uint32_t w1 = b.worker_thread(201), w2 = b.worker_thread(202);
  const int steps = 40;
  for (int i = 0; i < steps; ++i) {
    const double at = 50.0 * i;
    b.wait(at, at + 49);
    b.channel_handoff(b.trainer, at + 48.9, at + 49, at, i % 2 ? 202 : 201, i % 2 ? 202 : 201);
  }
  for (int k = 1; k <= steps / 2; ++k) {
    b.counter("cpu.process_ns", 100.0 * k, 1e6 * k, 0, w1 - 1);
    b.counter("cpu.process_ns", 100.0 * k + 1, 1e6 * k, 0, w2 - 1);
  }
  b.add(Kind::kRange, b.trainer, 50.0 * steps - 1, 50.0 * steps);
  const auto r = b.analyze();
  BOOST_TEST(r.cause.rfind("input-bound", 0) == 0, r.cause);
  BOOST_TEST(r.feed.other_ms_per_item >= 90.0, r.feed.other_ms_per_item);
  BOOST_REQUIRE(!r.remedies.empty());
  const auto& m = r.remedies.front();
  BOOST_TEST(m.id == "more_workers");
  BOOST_TEST(m.pytorch_knob.find("8 producer processes") == 0, m.pytorch_knob << " / " << m.evidence);
  BOOST_TEST(m.bound);
  BOOST_TEST(m.evidence.find("Little's law asks for 100") != std::string::npos, m.evidence);
  // At 8: 1 ms of work + 100 / 8 - 1 ms of waiting per step.
  BOOST_TEST(m.predicted_step_ms == 12.5, boost::test_tools::tolerance(0.05));
}

// Hand-off steps have no stability gate of their own: every get opens a
// step from the first, and the report's warm-up rule (summary.hpp) is what
// sets the start apart — the first step, and those after it still longer
// than 1.5x the median step. A slow start (workers starting: 3 steps of
// 100 ms, then 20 ms) is warm-up; a fast one (a queue filled before the
// trainer asked: 3 steps of 2 ms) is not, past the first step.
BOOST_AUTO_TEST_CASE(handoff_steps_leave_their_start_to_the_warmup_rule) {
  for (const double first_ms : {100.0, 2.0}) {
    BOOST_TEST_CONTEXT("first steps of " << first_ms << " ms") {
      RankBuilder b;
      b.worker_thread(201);
      double at = 10;
      for (int i = 0; i < 20; ++i) {
        b.channel_handoff(b.trainer, at - 1, at + 0.05, at, 201, 201);
        at += i < 3 ? first_ms : 20.0;
      }
      b.add(Kind::kRange, b.trainer, at - 1, at);
      const auto r = b.analyze();
      BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kHandoffs));
      BOOST_TEST(r.steps.size() == 20u);
      BOOST_TEST(r.steps[0].start_ns == ms(10));  // the first get opens the first step
      BOOST_TEST(r.warmup_steps == (first_ms > 20 ? 3u : 1u));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
