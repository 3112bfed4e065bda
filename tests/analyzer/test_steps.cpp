// Step detection: the three sources and their priority, nested ranges, a
// custom pattern, missing end events, warm-up and outliers.
#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::StepSource;
namespace fmt = stallscope::format;

BOOST_AUTO_TEST_SUITE(steps)

BOOST_AUTO_TEST_CASE(step_events_define_steps_and_win_over_ranges) {
  RankBuilder b;
  b.step(0, 0, 100).step(1, 100, 200).range("train_step", b.trainer, 10, 90);
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kStepEvents));
  BOOST_REQUIRE_EQUAL(r.steps.size(), 2u);
  BOOST_TEST(r.steps[1].index == 1u);
}

BOOST_AUTO_TEST_CASE(nested_ranges_use_the_outermost_match) {
  RankBuilder b;
  for (int i = 0; i < 3; ++i) {
    b.range("ProfilerStep#" + std::to_string(i + 5), b.trainer, 100.0 * i, 100.0 * i + 100);
    b.range("train_step", b.trainer, 100.0 * i + 10, 100.0 * i + 90);
    b.range("forward", b.trainer, 100.0 * i + 20, 100.0 * i + 50);
  }
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kRanges));
  BOOST_TEST(r.source_detail == "ProfilerStep#");
  BOOST_REQUIRE_EQUAL(r.steps.size(), 3u);
  BOOST_TEST(r.steps[0].index == 5u);
  BOOST_TEST(r.steps[2].wall() == ms(100));
}

BOOST_AUTO_TEST_CASE(begin_end_ranges_match_case_insensitively) {
  RankBuilder b;
  for (int i = 0; i < 2; ++i) {
    b.add(Kind::kRange, b.trainer, 50.0 * i, 50.0 * i).t.events.back().phase = fmt::kBegin;
    b.t.events.back().name = b.t.name_id("Iteration");
    b.add(Kind::kRange, b.trainer, 50.0 * i + 50, 50.0 * i + 50).t.events.back().phase = fmt::kEnd;
  }
  const auto r = b.analyze();
  BOOST_REQUIRE_EQUAL(r.steps.size(), 2u);
  BOOST_TEST(r.steps[1].start_ns == ms(50));
}

BOOST_AUTO_TEST_CASE(custom_step_pattern) {
  RankBuilder b;
  b.range("fwd_bwd 1", b.trainer, 0, 10).range("fwd_bwd 2", b.trainer, 10, 20);
  stallscope::analyzer::AnalyzeOptions o;
  // Unmatched: nothing delimits steps, the whole trace is one window.
  const auto whole = b.analyze(o);
  BOOST_TEST(static_cast<int>(whole.source) == static_cast<int>(StepSource::kWholeTrace));
  BOOST_REQUIRE_EQUAL(whole.steps.size(), 1u);
  BOOST_TEST(whole.steps[0].start_ns == ms(0));
  BOOST_TEST(whole.steps[0].end_ns == ms(20));
  BOOST_TEST(whole.warnings.front().find("one window") != std::string::npos);
  o.step_pattern = "^fwd_bwd";
  BOOST_TEST(b.analyze(o).steps.size() == 2u);
}

BOOST_AUTO_TEST_CASE(bad_step_pattern_names_the_flag) {
  RankBuilder b;
  stallscope::analyzer::AnalyzeOptions o;
  o.step_pattern = "(";
  BOOST_CHECK_EXCEPTION(b.analyze(o), stallscope::analyzer::AnalyzeError,
                        [](const auto& e) { return std::string(e.what()).find("--step-pattern") != std::string::npos; });
}

BOOST_AUTO_TEST_CASE(data_wait_period_defines_steps_without_marks) {
  RankBuilder b;
  for (int i = 0; i < 4; ++i) b.wait(100.0 * i, 100.0 * i + 10);
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kDataWaits));
  // Three full periods, then the final partial step from the last wait to
  // the last event, closed by the analyzer.
  BOOST_REQUIRE_EQUAL(r.steps.size(), 4u);
  BOOST_TEST(r.steps[2].start_ns == ms(200));
  BOOST_TEST(r.steps[2].end_ns == ms(300));
  BOOST_TEST(!r.steps[2].closed_by_analyzer);
  BOOST_TEST(r.steps[3].start_ns == ms(300));
  BOOST_TEST(r.steps[3].end_ns == ms(310));
  BOOST_TEST(r.steps[3].closed_by_analyzer);
}

BOOST_AUTO_TEST_CASE(missing_end_events_close_at_next_begin_or_last_event) {
  RankBuilder b;
  auto mark = [&](uint8_t phase, double t, uint64_t i) {
    b.add(Kind::kStep, b.trainer, t, t, i).t.events.back().phase = phase;
  };
  mark(fmt::kBegin, 0, 0);
  mark(fmt::kBegin, 100, 1);  // step 0's end was lost
  mark(fmt::kEnd, 200, 1);
  mark(fmt::kBegin, 200, 2);  // never ends
  b.kernel(200, 250);
  const auto r = b.analyze();
  BOOST_REQUIRE_EQUAL(r.steps.size(), 3u);
  BOOST_TEST(r.steps[0].closed_by_analyzer);
  BOOST_TEST(r.steps[0].end_ns == ms(100));
  BOOST_TEST(!r.steps[1].closed_by_analyzer);
  BOOST_TEST(r.steps[2].end_ns == ms(250));
  BOOST_TEST(!r.warnings.empty());
}

BOOST_AUTO_TEST_CASE(warmup_excluded_and_outliers_listed) {
  RankBuilder b;
  double t = 0;
  const double walls[] = {500, 300, 100, 100, 100, 100, 400, 100, 100, 100};
  for (int i = 0; i < 10; ++i) {
    b.step(i, t, t + walls[i]).kernel(t, t + walls[i]);
    t += walls[i];
  }
  const auto r = b.analyze();
  BOOST_TEST(r.warmup_steps == 2u);
  BOOST_TEST(r.steady_steps == 8u);
  BOOST_TEST(r.step_p50_ms == 100.0);
  BOOST_TEST(r.steps[6].outlier);
  BOOST_TEST(!r.steps[0].outlier);
}

// An evaluation loop (the hooks' phase:eval range, begin/end on the trainer
// thread) is a phase, not steps: with steps from data waits, the step before
// it ends where it begins, and its own waits open none.
BOOST_AUTO_TEST_CASE(phase_eval_waits_open_no_steps) {
  RankBuilder b;
  auto mark_range = [&](double at, uint8_t phase) {
    b.add(Kind::kRange, b.trainer, at, at);
    b.t.events.back().phase = phase;
    b.t.events.back().name = b.t.name_id("phase:eval");
  };
  for (double t : {0.0, 10.0, 20.0, 30.0, 60.0, 70.0, 80.0}) b.wait(t, t + 2).kernel(t + 2, t + 9);
  mark_range(40, fmt::kBegin);
  for (double t : {40.0, 45.0, 50.0, 55.0}) b.wait(t, t + 1).kernel(t + 1, t + 4);
  mark_range(60, fmt::kEnd);
  const auto r = b.analyze();
  BOOST_TEST(static_cast<int>(r.source) == static_cast<int>(StepSource::kDataWaits));
  BOOST_REQUIRE_EQUAL(r.steps.size(), 7u);
  BOOST_TEST(r.steps[3].start_ns == ms(30));
  BOOST_TEST(r.steps[3].end_ns == ms(40));
  BOOST_TEST(r.steps[4].start_ns == ms(60));
  BOOST_REQUIRE_EQUAL(r.phases.size(), 1u);
  BOOST_TEST(r.phases[0].count == 1u);
  BOOST_TEST(r.phases[0].total_ms == 20.0, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_SUITE_END()
