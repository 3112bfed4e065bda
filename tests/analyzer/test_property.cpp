// Property: for random event sets, every step's parts are >= 0 and sum to
// its wall time exactly.
#include <boost/test/unit_test.hpp>

#include <random>

#include "analyzer/rank_builder.hpp"

using namespace stallscope::testing;

BOOST_AUTO_TEST_SUITE(property)

namespace {

RankBuilder random_rank(std::mt19937_64& rng) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  std::uniform_real_distribution<double> t(0, 1000), d(0, 80);
  std::uniform_int_distribution<int> kind(0, 12), sample(1, 20);
  for (int i = 0; i < 10; ++i) b.step(i, 100.0 * i, 100.0 * i + 100 - (i % 3));
  for (int i = 0; i < 120; ++i) {
    const double a = t(rng), e = a + d(rng);
    switch (kind(rng)) {
      case 0: b.kernel(a, e); break;
      case 1: b.collective(a, e); break;
      case 2: b.copy(Kind::kH2D, a, e); break;
      case 3: b.copy(Kind::kD2H, a, e); break;
      case 4: b.sync(a, e); break;
      case 5: b.api(a, e); break;
      case 6: b.wait(a, e, static_cast<uint64_t>(sample(rng))); break;
      case 7: b.read(w, a, e, sample(rng), d(rng) / 4); break;
      case 8: b.pre(w, a, e, sample(rng), 2); break;
      case 9: b.ready(w, a, static_cast<uint64_t>(sample(rng)), {uint64_t(sample(rng)), uint64_t(sample(rng))}); break;
      case 10: b.counter("cpu.thread_ns", a, a * 3e5, 100); break;
      case 11: b.counter("cpu.thread_ns", a, a * 5e5, 200); break;
      default: b.copy(Kind::kMemset, a, e); break;
    }
  }
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(parts_are_non_negative_and_sum_to_wall_time) {
  std::mt19937_64 rng(20240601);
  size_t checked = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const RankBuilder b = random_rank(rng);
    const auto r = b.analyze();
    BOOST_REQUIRE_EQUAL(r.steps.size(), 10u);
    for (const auto& s : r.steps) {
      for (int64_t p : s.parts) BOOST_REQUIRE_GE(p, 0);
      BOOST_REQUIRE_EQUAL(stallscope::analyzer::sum(s.parts), s.wall());
      ++checked;
    }
  }
  BOOST_TEST(checked == 3000u);
}

// Named activities on the trainer: ranges (data loading, an optimizer
// step, logging), API calls, syncs and stack samples, nested or not.
void add_activities(RankBuilder& b, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> t(0, 1000), d(0, 30);
  std::uniform_int_distribution<int> kind(0, 5);
  static const char* kNames[] = {"load_batch", "Optimizer.step#AdamW.step", "train.py(9): log_metrics",
                                 "forward", "aten::mm", "print"};
  for (int i = 0; i < 60; ++i) {
    const double a = t(rng), e = a + d(rng);
    const std::string name = kNames[static_cast<size_t>(kind(rng))];
    switch (kind(rng)) {
      case 0: b.range(name, b.trainer, a, e); break;
      case 1: b.api("cudaLaunchKernel", a, e); break;
      case 2: b.sync("cudaStreamSynchronize", a, e); break;
      case 3: b.stack(name, a, d(rng) / 3); break;
      case 4: b.api("cudaMemcpyAsync", a, a + d(rng) / 10); break;
      default: b.range(name, b.trainer, a, a + d(rng) / 5); break;
    }
  }
}

int64_t host_ns(const stallscope::analyzer::StepResult& s) {
  using stallscope::analyzer::idx;
  return s.parts[idx(Part::kHostAfterSync)] + s.parts[idx(Part::kHostLaunch)] +
         s.parts[idx(Part::kHostCpu)] + s.parts[idx(Part::kHostBlocked)];
}

BOOST_AUTO_TEST_CASE(gap_classes_partition_the_host_parts_exactly) {
  std::mt19937_64 rng(20240927);
  size_t checked = 0, with_host = 0;
  for (int iter = 0; iter < 300; ++iter) {
    RankBuilder b = random_rank(rng);
    b.kernel(0, 1);  // device activity: the host parts' gaps are classed
    add_activities(b, rng);
    const auto r = b.analyze();
    BOOST_REQUIRE(r.host_gaps.analyzed);
    for (const auto& s : r.steps) {
      int64_t sum = 0;
      for (int64_t g : s.gap_ns) {
        BOOST_REQUIRE_GE(g, 0);
        sum += g;
      }
      BOOST_REQUIRE_EQUAL(sum, host_ns(s));
      with_host += host_ns(s) > 0 ? 1 : 0;
      ++checked;
    }
  }
  BOOST_TEST(checked == 3000u);
  BOOST_TEST(with_host > 1000u);  // the property was tested on real host time
}

BOOST_AUTO_TEST_CASE(without_device_parts_still_sum) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 100; ++iter) {
    RankBuilder b = random_rank(rng);
    std::erase_if(b.t.events, [](const auto& e) {
      return e.kind == Kind::kKernel || e.kind == Kind::kCollective || e.kind == Kind::kH2D ||
             e.kind == Kind::kD2H || e.kind == Kind::kMemset;
    });
    for (const auto& s : b.analyze().steps) {
      for (int64_t p : s.parts) BOOST_REQUIRE_GE(p, 0);
      BOOST_REQUIRE_EQUAL(stallscope::analyzer::sum(s.parts), s.wall());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
