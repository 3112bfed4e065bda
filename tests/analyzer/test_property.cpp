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
