// Bad input and shutdown (RELIABILITY.md 21, 24, 26): missing, unreadable,
// shrunk and changed files give an error naming the file and offset; policy
// fail ends the epoch with it, skip goes on and counts; a completion that
// matches no request is never applied; stop mid-epoch returns promptly.
#define BOOST_TEST_MODULE loader_errors
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include "loader_fixtures.hpp"
#include "read_engine.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

struct Setup {
  FileSet files{std::vector<size_t>(12, 20000)};
  sl::Dataset ds;
  Setup() {
    std::string err;
    BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  }
  std::string path(int i) const {
    char n[32];
    std::snprintf(n, sizeof n, "/s%06d.bin", i);
    return files.root() + n;
  }
  EpochResult run(sl::ErrorPolicy p) {
    sl::Config cfg = test_config();
    cfg.on_error = p;
    std::unique_ptr<sl::Loader> l;
    std::string err;
    BOOST_REQUIRE(sl::Loader::create(ds, cfg, {}, &l, &err) == 0);
    return run_epoch(*l);
  }
  void check_others_exact(const EpochResult& r, int broken) {
    for (const auto& [i, h] : r.hash_of) {
      BOOST_TEST(static_cast<int>(i) != broken);
      BOOST_TEST(h == files.hashes[i]);
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_errors)

BOOST_AUTO_TEST_CASE(missing_file_fails_the_epoch_naming_file_and_offset) {
  Setup s;
  ::unlink(s.path(5).c_str());
  const EpochResult r = s.run(sl::ErrorPolicy::kFail);
  BOOST_TEST(r.rc == -EIO);
  BOOST_TEST(r.error.find(s.path(5) + ": offset 0: cannot open: No such file") == 0u, r.error);
  s.check_others_exact(r, 5);
}

BOOST_AUTO_TEST_CASE(missing_file_is_skipped_and_counted_with_policy_skip) {
  Setup s;
  ::unlink(s.path(5).c_str());
  const EpochResult r = s.run(sl::ErrorPolicy::kSkip);
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(r.hash_of.size() == 11u);
  BOOST_TEST(r.skipped == 1u);
  BOOST_TEST(r.stats.skipped_samples == 1u);
  s.check_others_exact(r, 5);
}

BOOST_AUTO_TEST_CASE(changed_size_is_an_error_naming_the_offset) {
  Setup s;
  BOOST_REQUIRE(::truncate(s.path(3).c_str(), 7000) == 0);
  const EpochResult r = s.run(sl::ErrorPolicy::kFail);
  BOOST_TEST(r.rc == -EIO);
  BOOST_TEST(r.error.find(s.path(3) + ": offset 7000: file size changed from 20000 to 7000") ==
                 0u, r.error);
}

BOOST_AUTO_TEST_CASE(file_shrinking_while_read_is_an_error) {
  // Shrinks the file between open (size check passes) and the read, through the seam.
  struct ShrinkSys : sl::Sys {
    std::string victim;
    int open(const char* p, int f) noexcept override {
      const int fd = Sys::open(p, f);
      if (victim == p) ::truncate(p, 5000);
      return fd;
    }
    int fstat(int fd, struct stat* st) noexcept override {
      const int rc = Sys::fstat(fd, st);
      if (st->st_size == 5000) st->st_size = 20000;  // as it was at open
      return rc;
    }
  } sys;
  Setup s;
  sys.victim = s.path(2);
  sl::Config cfg = test_config();
  cfg.direct = sl::Toggle::kOff;
  std::unique_ptr<sl::Loader> l;
  std::string err;
  BOOST_REQUIRE(sl::Loader::create(s.ds, cfg, {}, &l, &err, sys) == 0);
  const EpochResult r = run_epoch(*l);
  BOOST_TEST(r.rc == -EIO);
  // Chunk [0, 16K) stops at 5000, chunk [16K, 20000) at once: either may report first.
  const bool named = r.error.find(s.path(2) + ": offset 5000: end of file") == 0u ||
                     r.error.find(s.path(2) + ": offset 16384: end of file") == 0u;
  BOOST_TEST(named, r.error);
}

BOOST_AUTO_TEST_CASE(unreadable_file_as_another_user_names_the_file) {
  Setup s;
  ::chmod(s.path(4).c_str(), 0);
  const auto r = run_cmd({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          loader_probe_path(), "epoch", s.files.root(), "--loader-probe=0"});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(r.value("rc") == EIO);
  BOOST_TEST(r.out.find(s.path(4) + ": offset 0: cannot open: Permission denied") !=
                 std::string::npos, r.out);
  const auto skip = run_cmd({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             loader_probe_path(), "epoch", s.files.root(), "--loader-probe=0",
                             "--loader-error-policy=skip"});
  BOOST_TEST(skip.value("samples") == 11);
  BOOST_TEST(skip.value("skipped") == 1);
  BOOST_TEST(skip.value("mismatches") == 0);
}

BOOST_AUTO_TEST_CASE(stray_and_duplicate_completions_are_never_applied) {
  // A reader that answers every request twice and adds one for no request.
  struct EchoReader : sl::StorageReader {
    std::vector<sl::Completion> q;
    int submit(std::span<const sl::ReadRequest> rs) noexcept override {
      for (const auto& r : rs) {
        const ssize_t n = ::pread(r.fd, r.buf, r.length, static_cast<off_t>(r.offset));
        q.push_back({r.user_data, static_cast<int32_t>(n)});
        q.push_back({r.user_data, static_cast<int32_t>(n)});  // duplicate
        q.push_back({r.user_data ^ (1ull << 40), 4096});      // stale generation
      }
      return static_cast<int>(rs.size());
    }
    int reap(std::span<sl::Completion> out, unsigned, int) noexcept override {
      size_t n = std::min(out.size(), q.size());
      std::copy(q.begin(), q.begin() + static_cast<long>(n), out.begin());
      q.erase(q.begin(), q.begin() + static_cast<long>(n));
      return static_cast<int>(n);
    }
    int register_buffers(std::span<const sl::BufferRange>) noexcept override { return 0; }
    uint32_t capacity() const noexcept override { return 4; }
    uint32_t in_flight() const noexcept override { return static_cast<uint32_t>(q.size()); }
    std::string_view name() const noexcept override { return "echo"; }
  } reader;
  Setup s;
  sl::detail::FileTable files(s.ds, sl::real_sys(), sl::Toggle::kOff);
  int done = 0;
  sl::detail::ReadEngine engine(reader, files, 8192, [&](sl::detail::SampleRead*) { ++done; });
  std::vector<std::vector<std::byte>> bufs(12, std::vector<std::byte>(24576));
  std::vector<sl::detail::SampleRead> reads(12);
  for (size_t i = 0; i < 12; ++i) {
    reads[i].file = static_cast<uint32_t>(i);
    reads[i].length = 20000;
    reads[i].buf = bufs[i].data();
    reads[i].buf_bytes = bufs[i].size();
    engine.add(&reads[i]);
  }
  for (int i = 0; i < 1000 && !engine.idle(); ++i) BOOST_REQUIRE(engine.poll(10) == 0);
  BOOST_TEST(done == 12);
  BOOST_TEST(engine.stats().reads == 12u * 3);  // 3 chunks of 8192 per sample
  BOOST_TEST(engine.stats().stray == 2u * 36);
  for (size_t i = 0; i < 12; ++i)
    BOOST_TEST(fnv1a(reads[i].view, 20000) == s.files.hashes[i]);
}

BOOST_AUTO_TEST_CASE(stop_mid_epoch_returns_promptly) {
  Setup s;
  sl::Config cfg = test_config();
  cfg.device = sl::DeviceKind::kEmulated;
  sl::Pipeline p;
  p.transform = [](sl::Sample&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0;
  };
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<sl::Loader> l;
    std::string err;
    BOOST_REQUIRE(sl::Loader::create(s.ds, cfg, p, &l, &err) == 0);
    l->start_epoch(0);
    sl::Batch b;
    BOOST_REQUIRE(l->next_batch(&b) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    if (round == 0) l->stop();  // explicit stop, then destruction
    l.reset();                  // round 1: destruction mid-epoch
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST(took < 2.0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
