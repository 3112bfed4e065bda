// Black-box: the storage probe keeps to its time budget and reports
// plausible rates at queue depths 1, 8 and 32; O_DIRECT reads are recorded
// with CacheMethod::kDirect semantics (every byte a miss). And the pool's
// ordering holds when preprocessing is much slower than reading.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "loader_fixtures.hpp"
#include "stallscope/loader/probe.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

double probe_seconds(const sl::Dataset& ds, double budget, sl::ProbeReport* rep) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = sl::run_storage_probe(ds, sl::Backend::kUring, 1 << 20, budget, sl::real_sys(), rep);
  BOOST_REQUIRE_EQUAL(rc, 0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

sl::Dataset dataset_of(const FileSet& files) {
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE_EQUAL(sl::Dataset::from_directory(files.root(), &ds, &err), 0);
  return ds;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_probe)

BOOST_AUTO_TEST_CASE(probe_keeps_to_its_budget_and_rates_are_plausible) {
  FileSet files(std::vector<size_t>(48, 4 << 20));  // 192 MiB: more than 0.5 s can read cold
  sl::drop_cache(files.root());
  const sl::Dataset ds = dataset_of(files);
  for (double budget : {0.5, 0.05}) {
    BOOST_TEST_CONTEXT("budget " << budget) {
      sl::ProbeReport rep;
      const double s = probe_seconds(ds, budget, &rep);
      BOOST_TEST(s <= budget + 0.15, "probe took " << s << " s");
      BOOST_REQUIRE_EQUAL(rep.rates.size(), 3u);
      double total = 0;
      for (size_t i = 0; i < rep.rates.size(); ++i) {
        const sl::ProbeRate& r = rep.rates[i];
        BOOST_TEST(r.queue_depth == (i == 0 ? 1u : i == 1 ? 8u : 32u));
        BOOST_TEST(r.reads > 0u);
        BOOST_TEST(r.bytes <= r.reads * rep.read_size);  // no read larger than asked
        BOOST_TEST(r.bytes * 2 >= r.reads * rep.read_size / 2);  // mostly full reads
        BOOST_TEST(r.seconds > 0.0);
        total += r.seconds;
        // 1 MB/s .. 100 GB/s: anything outside is a clock or a counting bug.
        BOOST_TEST(r.mb_per_s() >= 1.0);
        BOOST_TEST(r.mb_per_s() <= 100e3);
      }
      BOOST_TEST(total <= budget + 0.05);
      BOOST_TEST(nlohmann::json::accept(rep.json()));
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
