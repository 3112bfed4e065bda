// Black-box: every delivered sample is byte-exact, exactly once per epoch,
// in the plan's order — for both backends, buffered and O_DIRECT, on the
// local disk and tmpfs: empty and 1-byte files, sizes off 4096, files
// larger than the read size, many small files, shard records crossing
// chunk boundaries (RELIABILITY.md 24, the byte-exact list).
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <vector>
#include <thread>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "loader_fixtures.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

const std::vector<size_t> kOddSizes = {0,     1,     4095,           4096,   4097, 12345,
                                       16384, 16385, 3 * 16384 + 17, 100000, 7,    65536 + 1};

struct Variant {
  sl::Backend backend;
  sl::Toggle direct;
  const char* base;
};
std::ostream& operator<<(std::ostream& o, const Variant& v) {
  return o << sl::backend_name(v.backend) << (v.direct == sl::Toggle::kOn ? "/direct" : "/buffered")
           << " on " << v.base;
}

const Variant kVariants[] = {
    {sl::Backend::kPread, sl::Toggle::kOff, "/tmp"},
    {sl::Backend::kPread, sl::Toggle::kOn, "/tmp"},
    {sl::Backend::kUring, sl::Toggle::kOff, "/tmp"},
    {sl::Backend::kUring, sl::Toggle::kOn, "/tmp"},
    {sl::Backend::kUring, sl::Toggle::kOff, "/dev/shm"},
    {sl::Backend::kUring, sl::Toggle::kOn, "/dev/shm"},
};

std::unique_ptr<sl::Loader> make(sl::Dataset ds, sl::Config cfg, sl::Pipeline p = {}) {
  std::unique_ptr<sl::Loader> l;
  std::string err;
  BOOST_REQUIRE_MESSAGE(sl::Loader::create(std::move(ds), cfg, std::move(p), &l, &err) == 0, err);
  return l;
}

void check_exact(const EpochResult& r, const std::vector<uint64_t>& hashes) {
  BOOST_TEST(r.rc == 0, r.error);
  BOOST_TEST(r.duplicates == 0u);
  BOOST_REQUIRE_EQUAL(r.hash_of.size(), hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) BOOST_TEST_CONTEXT("sample " << i) {
      BOOST_TEST(r.hash_of.at(i) == hashes[i]);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_bytes)

BOOST_DATA_TEST_CASE(odd_sizes_are_byte_exact, boost::unit_test::data::make(kVariants), v) {
  FileSet files(kOddSizes, v.base);
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.backend = v.backend;
  cfg.direct = v.direct;
  auto l = make(ds, cfg);
  BOOST_TEST(l->backend() == (v.backend == sl::Backend::kUring ? "uring" : "pread"));
  const EpochResult r = run_epoch(*l);
  check_exact(r, files.hashes);
  BOOST_TEST(r.batches == 3u);
  BOOST_TEST(r.stats.reads > kOddSizes.size());  // large files came in several chunks
  const auto plan = sl::make_epoch_plan(ds, {cfg.seed, 0, 0, 1, true});
  BOOST_TEST(r.order == plan.samples);  // deterministic order within and across batches
}

BOOST_AUTO_TEST_CASE(many_small_files_over_two_epochs) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 600; ++i) sizes.push_back(1 + (i * 37) % 3000);
  FileSet files(sizes);
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.batch_size = 32;
  cfg.queue_depth = 32;
  auto l = make(ds, cfg);
  const EpochResult e0 = run_epoch(*l, 0);
  check_exact(e0, files.hashes);
  const EpochResult e1 = run_epoch(*l, 1);
  check_exact(e1, files.hashes);
  BOOST_TEST(e0.order != e1.order);  // reshuffled per epoch
  const EpochResult again = run_epoch(*l, 0);
  BOOST_TEST(again.order == e0.order);  // and reproducible
}

BOOST_AUTO_TEST_CASE(stats_count_bytes_and_the_cpu_of_the_loader_threads) {
  const std::vector<size_t> sizes(40, 50000);
  FileSet files(sizes);
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.direct = sl::Toggle::kOff;
  for (bool transform : {false, true}) {  // serial stages, then the pool's pipeline
    BOOST_TEST_CONTEXT("transform " << transform) {
      sl::Pipeline p;
      if (transform) p.transform = [](sl::Sample&) { return 0; };
      auto l = make(ds, cfg, p);
      rusage u0{};
      ::getrusage(RUSAGE_SELF, &u0);
      const EpochResult e0 = run_epoch(*l, 0);
      check_exact(e0, files.hashes);
      BOOST_TEST(e0.stats.bytes == 40u * 50000);
      BOOST_TEST(e0.stats.io_thread_cpu_ns > 0u);
      BOOST_TEST(e0.stats.prep_thread_cpu_ns > 0u);
      const EpochResult e1 = run_epoch(*l, 1);
      BOOST_TEST(e1.stats.bytes == 2u * 40 * 50000);  // cumulative over epochs
      BOOST_TEST(e1.stats.io_thread_cpu_ns > e0.stats.io_thread_cpu_ns);
      BOOST_TEST(e1.stats.prep_thread_cpu_ns > e0.stats.prep_thread_cpu_ns);
      rusage u1{};
      ::getrusage(RUSAGE_SELF, &u1);
      auto ns = [](const timeval& a, const timeval& b) {
        return uint64_t(b.tv_sec - a.tv_sec) * 1000000000u +
               uint64_t(b.tv_usec - a.tv_usec) * 1000u;
      };
      const uint64_t process = ns(u0.ru_utime, u1.ru_utime) + ns(u0.ru_stime, u1.ru_stime);
      // rusage ticks coarser than the thread clocks: allow one tick per thread.
      BOOST_TEST(e1.stats.io_thread_cpu_ns + e1.stats.prep_thread_cpu_ns <= process + 40000000u);
    }
  }
}

namespace {

// Reads that each take `delay_us` longer: storage slower than the consumer.
struct SlowSys : sl::Sys {
  unsigned delay_us = 0;
  ssize_t preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept override {
    ::usleep(delay_us);
    return Sys::preadv2(fd, iov, n, off, flags);
  }
};

// The read buffers (arenas) an epoch's batches used, with how many batches
// each: a batch's first sample starts at its arena's base (whole buffered
// files). Byte-exact as well.
std::map<const std::byte*, int> arenas_of_epoch(sl::Loader& l, const std::vector<uint64_t>& hashes,
                                                unsigned consumer_us) {
  std::map<const std::byte*, int> used;
  std::map<uint64_t, uint64_t> hash_of;
  l.start_epoch(0);
  sl::Batch b;
  int rc;
  while ((rc = l.next_batch(&b)) == 0) {
    BOOST_REQUIRE(!b.samples.empty());
    ++used[b.samples.front().bytes.data()];
    for (const auto& x : b.samples) hash_of[x.index] = fnv1a(x.bytes.data(), x.bytes.size());
    if (consumer_us) ::usleep(consumer_us);
  }
  BOOST_TEST(rc == sl::kEndOfEpoch, l.error());
  BOOST_REQUIRE_EQUAL(hash_of.size(), hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) BOOST_TEST(hash_of.at(i) == hashes[i]);
  return used;
}

}  // namespace

// A batch takes an arena only when the reads queued fall under the queue
// depth, and the arena released last: when the consumer waits on storage,
// two or three arenas stay in use (in cache) instead of every slot's; when
// the consumer is the slow side, the prefetch still fills every slot.
BOOST_AUTO_TEST_CASE(a_consumer_waiting_on_storage_reuses_the_arenas_it_released_last) {
  const std::vector<size_t> sizes(240, 8192);
  FileSet files(sizes);
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.backend = sl::Backend::kPread;
  cfg.direct = sl::Toggle::kOff;
  cfg.batch_size = 4;
  cfg.queue_depth = 4;
  cfg.pread_threads = 4;
  cfg.prefetch_batches = 5;  // 6 slots
  SlowSys slow;
  slow.delay_us = 2000;  // a batch's reads: ~2 ms; the consumer: none
  {
    std::unique_ptr<sl::Loader> l;
    BOOST_REQUIRE_MESSAGE(sl::Loader::create(ds, cfg, {}, &l, &err, slow) == 0, err);
    const auto used = arenas_of_epoch(*l, files.hashes, 0);
    // Share of the 60 batches read into the 3 busiest arenas: 1/2 when all
    // 6 take turns; nearly all here, a consumer preempted on a busy host
    // now and then letting a fourth in.
    std::vector<int> n;
    for (const auto& [a, k] : used) n.push_back(k);
    std::sort(n.rbegin(), n.rend());
    int top = 0, all = 0;
    for (size_t i = 0; i < n.size(); ++i) (i < 3 ? top : all) += n[i];
    all += top;
    BOOST_TEST(top >= 0.9 * all, top << " of " << all << " batches in the 3 busiest of "
                                      << used.size() << " arenas");
  }
  slow.delay_us = 0;  // storage fast, the consumer 3 ms a batch
  {
    std::unique_ptr<sl::Loader> l;
    BOOST_REQUIRE_MESSAGE(sl::Loader::create(ds, cfg, {}, &l, &err, slow) == 0, err);
    const auto used = arenas_of_epoch(*l, files.hashes, 3000);
    BOOST_TEST(used.size() == 6u, used.size() << " of 6 arenas used");
  }
}

BOOST_DATA_TEST_CASE(shard_records_crossing_chunks_are_exact,
                     boost::unit_test::data::make({sl::Backend::kPread, sl::Backend::kUring}) *
                         boost::unit_test::data::make({sl::Toggle::kOff, sl::Toggle::kOn}),
                     backend, direct) {
  TempDir d;
  const auto gen = run_cmd({GEN_SHARDS_PATH, "--out", d.path(), "--samples", "300", "--min-size",
                            "0", "--max-size", "30000", "--shard-size", "1000000"});
  BOOST_REQUIRE_EQUAL(gen.exit_code, 0);
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE_MESSAGE(sl::Dataset::from_shards(d / "index", &ds, &err) == 0, err);
  BOOST_TEST(ds.files().size() > 1u);
  std::vector<uint64_t> hashes;
  std::ifstream manifest(d / "manifest");
  for (std::string idx, len, hex; manifest >> idx >> len >> hex;)
    hashes.push_back(std::stoull(hex, nullptr, 16));
  BOOST_REQUIRE_EQUAL(hashes.size(), ds.size());
  sl::Config cfg = test_config();
  cfg.backend = backend;
  cfg.direct = direct;
  cfg.read_size = 8192;  // records of up to 30000 bytes span several chunks
  cfg.batch_size = 16;
  auto l = make(ds, cfg);
  check_exact(run_epoch(*l), hashes);
}

BOOST_AUTO_TEST_CASE(transform_and_collate_see_the_samples_in_order) {
  FileSet files({10, 20, 30, 40, 50, 60, 70});
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.shuffle = false;
  cfg.batch_size = 3;
  cfg.device = sl::DeviceKind::kEmulated;
  sl::Pipeline p;
  p.transform = [](sl::Sample& s) {  // replaces each sample by its length as 8 bytes
    s.output.resize(8);
    const uint64_t n = s.bytes.size();
    std::memcpy(s.output.data(), &n, 8);
    s.bytes = s.output;
    return 0;
  };
  auto l = make(ds, cfg, p);
  l->start_epoch(0);
  sl::Batch b;
  std::vector<uint64_t> lengths;
  while (l->next_batch(&b) == 0) {
    BOOST_TEST(b.host.size() == 8 * b.samples.size());
    for (size_t i = 0; i < b.host.size(); i += 8) {
      uint64_t n;
      std::memcpy(&n, b.host.data() + i, 8);
      lengths.push_back(n);
    }
  }
  BOOST_TEST(lengths == (std::vector<uint64_t>{10, 20, 30, 40, 50, 60, 70}),
             boost::test_tools::per_element());
}

// Without a transform the serial stages run on the I/O thread while they
// cost less than a hand-off; eight batches that each cost more move the
// rest of the epoch, and the next epochs, to the preprocessing thread.
BOOST_AUTO_TEST_CASE(serial_stages_run_on_the_io_thread_until_they_prove_slow) {
  FileSet files(std::vector<size_t>(48, 1000));
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.direct = sl::Toggle::kOff;
  for (const auto pause : {std::chrono::microseconds(0), std::chrono::microseconds(2000)}) {
    BOOST_TEST_CONTEXT("collate pause " << pause.count() << " us") {
      auto threads = std::make_shared<std::vector<std::string>>();  // per batch, in order
      sl::Pipeline p;
      p.collate = [threads, pause](std::span<const sl::Sample> samples,
                                   std::span<std::byte> dst) -> int64_t {
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        threads->emplace_back(name);
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
        uint64_t at = 0;
        for (const auto& s : samples) {
          if (s.bytes.size() > dst.size() - at) return -ENOSPC;
          std::memcpy(dst.data() + at, s.bytes.data(), s.bytes.size());
          at += s.bytes.size();
        }
        return static_cast<int64_t>(at);
      };
      auto l = make(ds, cfg, p);
      const EpochResult e0 = run_epoch(*l, 0);
      check_exact(e0, files.hashes);
      BOOST_TEST(e0.collated_bytes == 48u * 1000);
      BOOST_REQUIRE_EQUAL(threads->size(), 12u);
      const std::vector<std::string> first = *threads;
      threads->clear();
      const EpochResult e1 = run_epoch(*l, 1);
      check_exact(e1, files.hashes);
      BOOST_REQUIRE_EQUAL(threads->size(), 12u);
      std::vector<std::string> want0(12, "ss-loader-io"), want1 = want0;
      if (pause.count() > 0) {  // measured on 8 batches, then handed off for good
        std::fill(want0.begin() + 8, want0.end(), "ss-loader-prep");
        std::fill(want1.begin(), want1.end(), "ss-loader-prep");
      }
      BOOST_TEST(first == want0, boost::test_tools::per_element());
      BOOST_TEST(*threads == want1, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(ranks_split_an_epoch_without_overlap) {
  FileSet files(std::vector<size_t>(10, 100));
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  std::set<uint64_t> seen;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    sl::Config cfg = test_config();
    cfg.rank = rank;
    cfg.world_size = 2;
    auto l = make(ds, cfg);
    const EpochResult r = run_epoch(*l);
    BOOST_TEST(r.order.size() == 5u);
    for (auto i : r.order) BOOST_TEST(seen.insert(i).second);
  }
  BOOST_TEST(seen.size() == 10u);
}

BOOST_AUTO_TEST_SUITE_END()
