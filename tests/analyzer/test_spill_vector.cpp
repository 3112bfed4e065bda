// SpillVector: a table that keeps only a few chunks in memory and the rest
// in the process's scratch file, read back unchanged; without a scratch file
// it keeps everything in memory and still works.
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <string>
#include <utility>

#include "analyzer/run_self.hpp"
#include "stallscope/analyzer/report.hpp"
#include "stallscope/analyzer/spill_vector.hpp"

namespace an = stallscope::analyzer;

namespace {

an::StepResult step(uint64_t i) {
  an::StepResult s;
  s.index = i;
  s.start_ns = int64_t(i) * 1000;
  s.end_ns = s.start_ns + 900;
  for (size_t p = 0; p < an::kPartCount; ++p) s.parts[p] = int64_t(i * 100 + p);
  return s;
}

bool same(const an::StepResult& a, const an::StepResult& b) {
  return a.index == b.index && a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.parts == b.parts &&
         a.warmup == b.warmup && a.outlier == b.outlier;
}

using Steps = an::SpillVector<an::StepResult>;
constexpr size_t kN = 10'000;  // dozens of chunks: most of them spilled

// Memory stops growing once a table holds its resident chunks: within 512
// elements for each table of a report, whatever the element's size, so a
// run of ~1,000 steps already shows the bound (bench/multirank_bench).
template <class T>
constexpr size_t bound_reached_at() {
  return an::SpillVector<T>::kChunk * an::SpillVector<T>::kResident;
}
static_assert(bound_reached_at<an::StepResult>() <= 512);
static_assert(bound_reached_at<an::CollectiveInstance>() <= 512);
static_assert(bound_reached_at<std::pair<int64_t, int64_t>>() <= 512);
static_assert(an::SpillVector<std::pair<int64_t, int64_t>>::kChunk == 256);  // 4 KiB chunks
static_assert(an::SpillVector<an::StepResult>::kChunk * sizeof(an::StepResult) <= 16384);

an::SpillVector<an::StepResult> filled() {
  an::SpillVector<an::StepResult> v;
  for (size_t i = 0; i < kN; ++i) v.push_back(step(i));
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(elements_come_back_unchanged_with_few_chunks_in_memory) {
  const auto v = filled();
  BOOST_TEST(v.size() == kN);
  BOOST_TEST(v.resident_chunks() <= an::SpillVector<an::StepResult>::kResident);
  BOOST_TEST(an::spill::Arena::instance().failure().empty());
  BOOST_TEST(an::spill::Arena::instance().bytes_in_use() >=
             (kN - Steps::kResident * Steps::kChunk) * sizeof(an::StepResult));
  size_t i = 0;
  for (const an::StepResult& s : v) BOOST_TEST_REQUIRE(same(s, step(i++)));
  BOOST_TEST(i == kN);
  for (size_t k : {size_t{9999}, size_t{0}, size_t{5000}, Steps::kChunk - 1, Steps::kChunk, size_t{4242}})
    BOOST_TEST_REQUIRE(same(v[k], step(k)), "element " << k);
  BOOST_TEST(same(v.front(), step(0)));
  BOOST_TEST(same(v.back(), step(kN - 1)));
  BOOST_CHECK_THROW(v.at(kN), std::out_of_range);
  BOOST_TEST(v.resident_chunks() <= an::SpillVector<an::StepResult>::kResident);
}

BOOST_AUTO_TEST_CASE(changes_to_spilled_elements_are_kept) {
  auto v = filled();
  an::StepResult s = v[3];
  s.outlier = true;
  v.set(3, s);
  v.edit(7000).parts[0] = -5;
  for (size_t i = 0; i < kN; i += 100) (void)v[i];  // every chunk in and out again
  BOOST_TEST(v[3].outlier);
  BOOST_TEST(!v[4].outlier);
  BOOST_TEST(v.peek(7000).parts[0] == -5);
  BOOST_TEST(v[7001].parts[0] == int64_t(7001 * 100));
}

BOOST_AUTO_TEST_CASE(copies_are_independent_and_moves_keep_the_data) {
  auto a = filled();
  const auto b = a;  // NOLINT: the copy is what is tested
  a.edit(10).index = 77;
  BOOST_TEST(b[10].index == 10u);
  BOOST_TEST(a[10].index == 77u);
  an::SpillVector<an::StepResult> c = std::move(a);
  BOOST_TEST(c.size() == kN);
  BOOST_TEST(c[10].index == 77u);
  BOOST_TEST(same(c[9000], step(9000)));
  const std::vector<an::StepResult> plain = c.to_vector();
  BOOST_TEST(plain.size() == kN);
  BOOST_TEST(same(plain[6000], step(6000)));
}

BOOST_AUTO_TEST_CASE(clearing_gives_the_scratch_space_back) {
  const uint64_t before = an::spill::Arena::instance().bytes_in_use();
  {
    auto v = filled();
    BOOST_TEST(an::spill::Arena::instance().bytes_in_use() > before);
    v.clear();
    BOOST_TEST(v.empty());
    BOOST_TEST(an::spill::Arena::instance().bytes_in_use() == before);
    v.push_back(step(1));
    BOOST_TEST(v[0].index == 1u);
  }
  BOOST_TEST(an::spill::Arena::instance().bytes_in_use() == before);
}

BOOST_AUTO_TEST_CASE(iterators_work_with_standard_algorithms) {
  const auto v = filled();
  BOOST_TEST(std::distance(v.begin(), v.end()) == std::ptrdiff_t(kN));
  const auto it = std::partition_point(v.begin(), v.end(),
                                       [](const an::StepResult& s) { return s.start_ns < 4'321'000; });
  BOOST_TEST(std::ptrdiff_t(it - v.begin()) == 4321);
  BOOST_TEST((*it).index == 4321u);
  BOOST_TEST(std::count_if(v.begin(), v.end(), [](const an::StepResult& s) { return s.index % 2 == 0; }) ==
             std::ptrdiff_t(kN / 2));
}

// Run in a child whose TMPDIR cannot hold a scratch file (the scratch file is
// opened once per process): the table stays in memory and loses nothing.
BOOST_AUTO_TEST_CASE(without_a_scratch_file_everything_stays_in_memory) {
  if (std::getenv("SPILL_TEST_CHILD") != nullptr) {
    const auto v = filled();
    BOOST_TEST(an::spill::Arena::instance().bytes_in_use() == 0u);
    const std::string why = an::spill::Arena::instance().failure();
    BOOST_TEST(why.find("/nonexistent/stallscope-spill-test") != std::string::npos, why);
    BOOST_TEST(v.resident_chunks() == (kN + Steps::kChunk - 1) / Steps::kChunk);
    for (size_t i = 0; i < kN; i += 37) BOOST_TEST_REQUIRE(same(v[i], step(i)));
    return;
  }
  const int st = stallscope::testing::run_self_test(
      "without_a_scratch_file_everything_stays_in_memory",
      {"SPILL_TEST_CHILD=1", "TMPDIR=/nonexistent/stallscope-spill-test"});
  BOOST_TEST(stallscope::testing::exited_ok(st), "child status " << st);
}

// Run in a child whose files may not grow past 40 KiB (RLIMIT_FSIZE, with
// SIGXFSZ ignored so that the write fails with EFBIG): the scratch file
// takes the first chunks, then a write fails halfway through the run. From
// then on the table stays in memory, nothing is lost, and the failure is
// named for the report's warnings.
BOOST_AUTO_TEST_CASE(a_write_failing_midway_keeps_the_rest_in_memory) {
  if (std::getenv("SPILL_TEST_CHILD") != nullptr) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{40 << 10, 40 << 10};
    BOOST_TEST_REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    auto v = filled();
    BOOST_TEST(an::spill::Arena::instance().bytes_in_use() > 0u);  // the first chunks went out
    const std::string why = an::spill::Arena::instance().failure();
    BOOST_TEST(why.find("writing the scratch file in /tmp failed") != std::string::npos, why);
    BOOST_TEST(why.find(std::strerror(EFBIG)) != std::string::npos, why);
    BOOST_TEST(v.resident_chunks() > kN / Steps::kChunk - 3);  // all but the spilled ones
    for (size_t i = 0; i < kN; i += 37) BOOST_TEST_REQUIRE(same(v[i], step(i)));
    // The chunks written before the failure come back; changes stick.
    for (size_t i = 0; i < kN; i += 101) {
      an::StepResult x = v[i];
      x.outlier = true;
      v.set(i, x);
    }
    for (size_t i = 0; i < kN; ++i) BOOST_TEST_REQUIRE(v[i].outlier == (i % 101 == 0));
    return;
  }
  const int st =
      stallscope::testing::run_self_test("a_write_failing_midway_keeps_the_rest_in_memory",
                                         {"SPILL_TEST_CHILD=1", "TMPDIR=/tmp"});
  BOOST_TEST(stallscope::testing::exited_ok(st), "child status " << st);
}
