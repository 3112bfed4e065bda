// Black-box: the storage probe issues no read once its deadline has passed
// and reports plausible rates at queue depths 1, 8 and 32; O_DIRECT reads
// are recorded with CacheMethod::kDirect semantics (every byte a miss). And
// the pool's ordering holds when preprocessing is much slower than reading.
// No case asserts how fast the machine is (RELIABILITY.md 38): the deadline
// is checked on a clock the test moves, the rates only for plausibility.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "loader_fixtures.hpp"
#include "stallscope/loader/probe.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

sl::Dataset dataset_of(const FileSet& files) {
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE_EQUAL(sl::Dataset::from_directory(files.root(), &ds, &err), 0);
  return ds;
}

// Real system calls, but a clock that moves only when io_uring submits a
// read, by `step_ns` each: the probe's deadlines fall after a known number
// of reads however slowly this machine runs.
struct ReadClockSys : sl::Sys {
  explicit ReadClockSys(int64_t step) : step_ns(step) {}
  int uring_submit(io_uring* ring) noexcept override {
    submits.fetch_add(1);
    now_ns.fetch_add(step_ns);
    return Sys::uring_submit(ring);
  }
  int64_t monotonic_ns() noexcept override { return now_ns.load(); }
  const int64_t step_ns;
  std::atomic<int64_t> now_ns{1'000'000'000};
  std::atomic<uint64_t> submits{0};
};

void check_plausible(const sl::ProbeReport& rep) {
  BOOST_REQUIRE_EQUAL(rep.rates.size(), 3u);
  for (size_t i = 0; i < rep.rates.size(); ++i) {
    const sl::ProbeRate& r = rep.rates[i];
    BOOST_TEST(r.queue_depth == (i == 0 ? 1u : i == 1 ? 8u : 32u));
    BOOST_TEST(r.reads > 0u);
    BOOST_TEST(r.reads <= r.issued);
    BOOST_TEST(r.bytes <= r.reads * rep.read_size);          // no read larger than asked
    BOOST_TEST(r.bytes * 2 >= r.reads * rep.read_size / 2);  // mostly full reads
    // Above 100 GB/s is a clock or a counting bug; a loaded machine only
    // lowers the rate, so there is no lower bound but "some data came".
    BOOST_TEST(r.mb_per_s() > 0.0);
    BOOST_TEST(r.mb_per_s() <= 100e3);
  }
  BOOST_TEST(nlohmann::json::accept(rep.json()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_probe)

// 1 ms per read and 10 ms per depth: ten reads fit before each deadline,
// so an eleventh in any depth is a read issued after it. Every depth has
// free buffers left when its deadline passes (QD 32 > 10; QD 1 and 8 reap
// and refill), so only the deadline can stop it.
BOOST_AUTO_TEST_CASE(no_read_is_issued_once_the_probes_clock_passes_the_deadline) {
  FileSet files(std::vector<size_t>(8, 4 << 20));
  const sl::Dataset ds = dataset_of(files);
  ReadClockSys sys(1'000'000);
  sl::ProbeReport rep;
  BOOST_REQUIRE_EQUAL(sl::run_storage_probe(ds, sl::Backend::kUring, 1 << 20, 0.030, sys, &rep), 0);
  BOOST_REQUIRE_EQUAL(rep.backend, "uring");  // label uring: io_uring must work here
  check_plausible(rep);
  uint64_t issued = 0;
  for (const sl::ProbeRate& r : rep.rates) {
    BOOST_TEST_CONTEXT("queue depth " << r.queue_depth) {
      BOOST_TEST(r.issued == 10u);  // none after the deadline, none short of it
      BOOST_TEST(r.reads == r.issued);
      BOOST_TEST(r.seconds == 0.010, boost::test_tools::tolerance(1e-9));  // the probe's clock
      issued += r.issued;
    }
  }
  BOOST_TEST(sys.submits.load() == issued);  // the kernel saw no read the report misses
}

// On the real clock: each depth reads until its deadline (the probe wraps
// round its files, so only the deadline stops it) and then returns; how
// long the reads in flight take to drain on a loaded machine is not asked.
BOOST_AUTO_TEST_CASE(probe_stops_at_its_deadline_and_rates_are_plausible) {
  FileSet files(std::vector<size_t>(48, 4 << 20));  // 192 MiB: more than 0.5 s can read cold
  sl::drop_cache(files.root());
  const sl::Dataset ds = dataset_of(files);
  for (double budget : {0.5, 0.05}) {
    BOOST_TEST_CONTEXT("budget " << budget) {
      sl::ProbeReport rep;
      const int rc =
          sl::run_storage_probe(ds, sl::Backend::kUring, 1 << 20, budget, sl::real_sys(), &rep);
      BOOST_REQUIRE_EQUAL(rc, 0);
      check_plausible(rep);
      for (const sl::ProbeRate& r : rep.rates)
        BOOST_TEST(r.seconds >= budget / 3 * (1 - 1e-6), "depth " << r.queue_depth);
    }
  }
}

BOOST_AUTO_TEST_CASE(direct_reads_count_every_byte_as_a_miss) {
  FileSet files({1 << 20, 3 << 20, 12345, 70000});
  sl::Config c = test_config();
  c.direct = sl::Toggle::kOn;
  c.read_size = 1 << 20;
  std::unique_ptr<sl::Loader> l;
  std::string err;
  BOOST_REQUIRE_EQUAL(sl::Loader::create(dataset_of(files), c, {}, &l, &err), 0);
  for (int e = 0; e < 2; ++e) run_epoch(*l, e);  // the second epoch would hit a buffered cache
  const sl::LoaderStats s = l->stats();
  if (s.direct_fallbacks > 0) {
    BOOST_TEST_MESSAGE("SKIP: O_DIRECT refused by this filesystem");
    return;
  }
  BOOST_TEST(s.cache_hit_bytes == 0u);
  BOOST_TEST(s.cache_miss_bytes == s.bytes);
  BOOST_TEST(sl::cache_method_name(format::CacheMethod::kDirect) == "direct");
}

BOOST_AUTO_TEST_CASE(order_holds_when_preprocessing_is_slow_and_uneven) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 61; ++i) sizes.push_back(1000 + 37 * i);
  FileSet files(sizes);
  sl::Config c = test_config();
  c.batch_size = 7;
  sl::Pipeline p;
  p.transform = [](sl::Sample& s) {  // uneven: some samples 50x slower
    std::this_thread::sleep_for(std::chrono::microseconds(s.index % 5 == 0 ? 2000 : 40));
    return 0;
  };
  std::unique_ptr<sl::Loader> l;
  std::string err;
  BOOST_REQUIRE_EQUAL(sl::Loader::create(dataset_of(files), c, p, &l, &err), 0);
  const EpochResult a = run_epoch(*l, 3);
  const EpochResult b = run_epoch(*l, 3);
  BOOST_TEST(a.rc == 0);
  BOOST_TEST(a.order.size() == sizes.size());
  BOOST_TEST(a.order == b.order);  // the same plan, the same order, every time
  BOOST_TEST(a.duplicates == 0u);
  for (const auto& [idx, h] : a.hash_of) BOOST_TEST(h == files.hashes[idx]);
}

BOOST_AUTO_TEST_SUITE_END()
