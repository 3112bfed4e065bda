// Bad input and shutdown (RELIABILITY.md 24, 26): missing, unreadable,
// shrunk and changed files give an error naming the file and offset; policy
// fail ends the epoch with it, skip goes on and counts; stop mid-epoch
// returns promptly, with or without a pool, and leaks no descriptor or
// thread.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "loader_fixtures.hpp"

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

// Open descriptors of this process.
size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Threads of the loader (ss-loader-io, -prep, -pread) and of io_uring
// (iou-wrk-*) now alive, by id; not oneTBB's workers (ss-loader-work),
// which are process-wide and outlive any loader.
std::set<std::string> loader_threads() {
  std::set<std::string> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(e.path() / "comm");
    std::string comm;
    std::getline(in, comm);
    if ((comm.rfind("ss-loader", 0) == 0 && comm != "ss-loader-work") ||
        comm.rfind("iou-wrk", 0) == 0)
      ids.insert(e.path().filename().string());
  }
  return ids;
}

// True when no thread of `now` is missing from `before`.
bool none_new(const std::set<std::string>& before, const std::set<std::string>& now) {
  return std::includes(before.begin(), before.end(), now.begin(), now.end());
}

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
  BOOST_TEST(r.error.find(s.path(3) + ": offset 7000: file size changed from 20000 to 7000") == 0u,
             r.error);
}

BOOST_DATA_TEST_CASE(file_shrinking_while_read_is_an_error_or_skipped,
                     boost::unit_test::data::make({sl::ErrorPolicy::kFail, sl::ErrorPolicy::kSkip}),
                     policy) {
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
  cfg.on_error = policy;
  std::unique_ptr<sl::Loader> l;
  std::string err;
  BOOST_REQUIRE(sl::Loader::create(s.ds, cfg, {}, &l, &err, sys) == 0);
  const EpochResult r = run_epoch(*l);
  s.check_others_exact(r, 2);
  if (policy == sl::ErrorPolicy::kSkip) {
    BOOST_TEST(r.rc == 0, r.error);
    BOOST_TEST(r.hash_of.size() == 11u);
    BOOST_TEST(r.skipped == 1u);
    BOOST_TEST(r.stats.skipped_samples == 1u);
    return;
  }
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
  BOOST_TEST(
      r.out.find(s.path(4) + ": offset 0: cannot open: Permission denied") != std::string::npos,
      r.out);
  const auto skip =
      run_cmd({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", loader_probe_path(),
               "epoch", s.files.root(), "--loader-probe=0", "--loader-error-policy=skip"});
  BOOST_TEST(skip.value("samples") == 11);
  BOOST_TEST(skip.value("skipped") == 1);
  BOOST_TEST(skip.value("mismatches") == 0);
}

// A hang guard, not a speed limit: a stop waits for the reads and the
// transforms in flight (3 ms and 20 ms each), milliseconds even on a
// loaded machine; a stop that hangs never returns.
constexpr double kStopGuardS = 10;

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
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST(took < kStopGuardS, "stop took " << took << " s");
  }
}

BOOST_DATA_TEST_CASE(stop_with_reads_in_flight_leaks_nothing_and_can_start_again,
                     boost::unit_test::data::make({sl::Backend::kUring, sl::Backend::kPread}),
                     backend) {
  // No transform (no pool): the stop lands while reads are in flight — slow
  // through the seam — and the preprocessing thread waits for them.
  struct SlowSys : sl::Sys {
    ssize_t preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept override {
      ::usleep(3000);
      return Sys::preadv2(fd, iov, n, off, flags);
    }
    void uring_filter(int32_t&, uint64_t) noexcept override { ::usleep(3000); }
  } sys;
  Setup s;
  sl::Config cfg = test_config();
  cfg.backend = backend;
  const size_t fds = open_fds();
  const auto threads = loader_threads();
  {
    std::unique_ptr<sl::Loader> l;
    std::string err;
    BOOST_REQUIRE(sl::Loader::create(s.ds, cfg, {}, &l, &err, sys) == 0);
    for (int round = 0; round < 3; ++round) {
      l->start_epoch(0);
      sl::Batch b;
      BOOST_REQUIRE(l->next_batch(&b) == 0);
      const auto t0 = std::chrono::steady_clock::now();
      l->stop();
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      BOOST_TEST(took < kStopGuardS, "stop took " << took << " s");
      BOOST_TEST(l->next_batch(&b) == -ECANCELED);
    }
    const EpochResult r = run_epoch(*l, 1);  // a stopped loader starts again, all exact
    s.check_others_exact(r, -1);
    BOOST_TEST(r.hash_of.size() == 12u);
    BOOST_TEST(r.stats.stray_completions == 0u);  // nothing of the stopped epochs came back
    l->start_epoch(2);                            // destroyed mid-epoch
  }
  BOOST_TEST(open_fds() == fds);
  auto now = loader_threads();  // io_uring's workers exit asynchronously: wait up to 10 s
  for (int i = 0; i < 1000 && !none_new(threads, now); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = loader_threads();
  }
  BOOST_TEST(none_new(threads, now));
}

BOOST_AUTO_TEST_SUITE_END()
