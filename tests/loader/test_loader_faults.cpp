// Faults produced through the syscall seam (RELIABILITY.md 20-23): io_uring
// setup refused, registered buffers refused, O_DIRECT refused at open or at
// the first read (and said once), short counts, -EAGAIN, -EINTR, -ECANCELED
// and -EBUSY on both backends, a completion queue that overflows — every
// sample still byte-exact, retries bounded and counted, no completion lost
// or seen twice.
#include <fcntl.h>
#include <liburing.h>

#include <atomic>
#include <thread>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "loader_fixtures.hpp"
#include "stallscope/loader/storage.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

// Rewrites every `every`-th result: an error code, or half the count.
struct FaultSys : sl::Sys {
  int uring_init_err = 0, register_err = 0, submit_busy = 0, open_direct_err = 0;
  int32_t inject = 0;  // -errno, or 1 for "short count"
  int every = 3;
  int persistent = 0;  // inject on every call
  std::atomic<int> calls{0}, injected{0};

  bool fire() { return inject != 0 && (persistent || ++calls % every == 0) && (++injected, true); }
  int32_t rewrite(int32_t res) { return inject == 1 ? (res > 1 ? res / 2 : res) : inject; }

  int open(const char* p, int flags) noexcept override {
    if (open_direct_err && (flags & O_DIRECT)) return errno = open_direct_err, -1;
    return Sys::open(p, flags);
  }
  ssize_t preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept override {
    if (!fire()) return Sys::preadv2(fd, iov, n, off, flags);
    if (inject == 1) {
      iovec half{iov->iov_base, iov->iov_len > 1 ? iov->iov_len / 2 : iov->iov_len};
      return Sys::preadv2(fd, &half, 1, off, flags);
    }
    return errno = -inject, -1;
  }
  int uring_init(unsigned e, io_uring* r, io_uring_params* p) noexcept override {
    return uring_init_err ? uring_init_err : Sys::uring_init(e, r, p);
  }
  int uring_register_buffers(io_uring* r, const iovec* v, unsigned n) noexcept override {
    return register_err ? register_err : Sys::uring_register_buffers(r, v, n);
  }
  int uring_submit(io_uring* r) noexcept override {
    if (submit_busy > 0 && submit_busy--) return -EBUSY;
    return Sys::uring_submit(r);
  }
  void uring_filter(int32_t& res, uint64_t) noexcept override {
    if (res >= 0 && fire()) res = rewrite(res);
  }
};

const std::vector<size_t> kSizes = {0, 1, 5000, 16384, 40000, 70001, 4096, 9};

EpochResult run_with(FaultSys& sys, sl::Backend b, sl::Toggle direct, std::string* why = nullptr,
                     std::string* backend = nullptr, const std::vector<size_t>& sizes = kSizes) {
  FileSet files(sizes);
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.backend = b;
  cfg.direct = direct;
  std::unique_ptr<sl::Loader> l;
  BOOST_REQUIRE_MESSAGE(sl::Loader::create(ds, cfg, {}, &l, &err, sys) == 0, err);
  if (backend) *backend = std::string(l->backend());
  EpochResult r = run_epoch(*l);
  if (why) *why = r.error;
  if (r.rc == 0) {
    BOOST_TEST(r.hash_of.size() == files.hashes.size());
    for (size_t i = 0; i < files.hashes.size(); ++i) BOOST_TEST_CONTEXT("sample " << i) {
        BOOST_TEST(r.hash_of[i] == files.hashes[i]);
      }
  }
  return r;
}

struct Inject {
  int32_t code;
  const char* name;
};
std::ostream& operator<<(std::ostream& o, const Inject& i) { return o << i.name; }
const Inject kInjects[] = {
    {-EAGAIN, "EAGAIN"}, {-EINTR, "EINTR"}, {-ECANCELED, "ECANCELED"}, {1, "short"}};

// How often `what` occurs in `text` (notes are one line each).
size_t lines_with(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_faults)

BOOST_DATA_TEST_CASE(transient_results_are_retried_and_bytes_stay_exact,
                     boost::unit_test::data::make(kInjects) *
                         boost::unit_test::data::make({sl::Backend::kUring, sl::Backend::kPread}) *
                         boost::unit_test::data::make({sl::Toggle::kOff, sl::Toggle::kOn}),
                     inj, backend, direct) {
  FaultSys sys;
  sys.inject = inj.code;
  const EpochResult r = run_with(sys, backend, direct);
  BOOST_TEST(r.rc == 0, r.error);
  BOOST_TEST(sys.injected.load() > 0);
  if (inj.code == 1)
    BOOST_TEST(r.stats.short_reads > 0u);
  else if (direct == sl::Toggle::kOn)  // every injected result hit a plain read
    BOOST_TEST(r.stats.retries == static_cast<uint64_t>(sys.injected.load()));
  else  // some hit RWF_NOWAIT reads or the classification probe: misses, not retries
    BOOST_TEST((r.stats.retries > 0u && r.stats.retries <= uint64_t(sys.injected.load())));
}

BOOST_DATA_TEST_CASE(persistent_eagain_fails_after_bounded_retries_naming_file_and_offset,
                     boost::unit_test::data::make({sl::Backend::kUring, sl::Backend::kPread}),
                     backend) {
  FaultSys sys;
  sys.inject = -EAGAIN;
  sys.persistent = 1;
  std::string why;
  const EpochResult r = run_with(sys, backend, sl::Toggle::kOff, &why);
  BOOST_TEST(r.rc == -EAGAIN);
  BOOST_TEST(why.find("/s0000") != std::string::npos, why);
  BOOST_TEST(why.find(".bin: offset ") != std::string::npos, why);
  BOOST_TEST(why.find("after 8 attempts") != std::string::npos, why);
}

BOOST_DATA_TEST_CASE(io_uring_refused_falls_back_to_pread_and_says_why,
                     boost::unit_test::data::make({-ENOSYS, -EPERM, -EINVAL, -ENOMEM}), code) {
  FaultSys sys;
  sys.uring_init_err = code;
  std::string backend;
  const EpochResult r = run_with(sys, sl::Backend::kAuto, sl::Toggle::kAuto, nullptr, &backend);
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(backend == "pread");
  std::string why;
  auto rd = sl::make_reader(sl::Backend::kAuto, {}, sys, &why);
  BOOST_TEST(
      why.find("io_uring unavailable: " + std::string(std::strerror(-code))) != std::string::npos,
      why);
}

BOOST_AUTO_TEST_CASE(registered_buffers_used_where_allowed_and_refusal_is_harmless) {
  FaultSys ok;
  const EpochResult fixed = run_with(ok, sl::Backend::kUring, sl::Toggle::kOn);
  BOOST_TEST(fixed.rc == 0);
  BOOST_TEST(fixed.stats.fixed_reads > 0u);
  FaultSys refused;
  refused.register_err = -ENOMEM;
  const EpochResult plain = run_with(refused, sl::Backend::kUring, sl::Toggle::kOn);
  BOOST_TEST(plain.rc == 0);
  BOOST_TEST(plain.stats.fixed_reads == 0u);
}

BOOST_AUTO_TEST_CASE(direct_refused_at_open_reads_buffered) {
  FaultSys sys;
  sys.open_direct_err = EINVAL;
  const EpochResult r = run_with(sys, sl::Backend::kUring, sl::Toggle::kOn);
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(r.stats.direct_fallbacks > 0u);
}

BOOST_AUTO_TEST_CASE(direct_refused_at_first_read_reads_buffered) {
  struct OnceEinval : FaultSys {
    void uring_filter(int32_t& res, uint64_t) noexcept override {
      if (!done && res >= 0) res = -EINVAL, done = true;
    }
    bool done = false;
  } once;
  const EpochResult r = run_with(once, sl::Backend::kUring, sl::Toggle::kOn);
  BOOST_TEST(r.rc == 0, r.error);
  BOOST_TEST(r.stats.direct_fallbacks == 1u);
}

BOOST_AUTO_TEST_CASE(submit_busy_is_retried_after_reaping) {
  FaultSys sys;
  sys.submit_busy = 3;
  const EpochResult r = run_with(sys, sl::Backend::kUring, sl::Toggle::kOff);
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(sys.submit_busy == 0);
}

BOOST_AUTO_TEST_CASE(completion_queue_overflow_loses_no_completion) {
  // A ring of 2 SQ and 2 CQ entries under a reader of depth 8: submitted in
  // rounds without reaping, 6 completions must wait in the kernel's
  // overflow list and come back through reap() like the others.
  struct SmallRingSys : sl::Sys {
    io_uring* ring = nullptr;
    int uring_init(unsigned, io_uring* r, io_uring_params* p) noexcept override {
      ring = r;
      p->flags |= IORING_SETUP_CQSIZE;
      p->cq_entries = 2;
      return Sys::uring_init(2, r, p);
    }
  } sys;
  TempDir d;
  write_file(d / "f", 8 * 4096, 5);
  const auto want = content(5, 8 * 4096);
  const int fd = ::open((d / "f").c_str(), O_RDONLY);
  int err = 0;
  auto r = sl::make_uring_reader({8, 1}, sys, &err);
  BOOST_REQUIRE_MESSAGE(r, "io_uring must work on this kernel: " << std::strerror(-err));
  std::vector<char> buf(8 * 4096);
  std::vector<sl::ReadRequest> reqs;
  for (uint64_t i = 0; i < 8; ++i) reqs.push_back({fd, i * 4096, 4096, buf.data() + i * 4096, i});
  size_t accepted = 0;
  for (int round = 0; round < 50 && accepted < reqs.size(); ++round) {
    const int n = r->submit(std::span(reqs).subspan(accepted));
    BOOST_REQUIRE(n >= 0);
    accepted += static_cast<size_t>(n);
  }
  BOOST_REQUIRE_EQUAL(accepted, 8u);  // never more than the reader's depth
  BOOST_TEST(r->submit({reqs.data(), 1}) == 0);
  bool overflowed = false;
  for (int i = 0; i < 200 && !overflowed; ++i) {
    overflowed = (IO_URING_READ_ONCE(*sys.ring->sq.kflags) & IORING_SQ_CQ_OVERFLOW) != 0;
    if (!overflowed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  BOOST_TEST(overflowed);  // the case under test really happened
  std::vector<int> seen(8, 0);
  sl::Completion c[16];
  for (int i = 0, got = 0; i < 100 && got < 8; ++i) {
    const int n = r->reap(c, 1, 100);
    BOOST_REQUIRE(n >= 0);
    for (int k = 0; k < n; ++k, ++got) {
      BOOST_REQUIRE(c[k].user_data < 8u);
      ++seen[c[k].user_data];
      BOOST_TEST(c[k].res == 4096);
    }
  }
  BOOST_TEST(seen == std::vector<int>(8, 1), boost::test_tools::per_element());
  BOOST_TEST(r->in_flight() == 0u);
  BOOST_TEST(r->reap(c, 0, 0) == 0);  // nothing more, nothing twice
  BOOST_TEST(std::memcmp(buf.data(), want.data(), buf.size()) == 0);
  ::close(fd);
}

BOOST_DATA_TEST_CASE(direct_refused_is_said_once_and_every_file_reads_buffered,
                     boost::unit_test::data::make({"direct-open-einval", "direct-read-einval"}),
                     fault) {
  FileSet files({5000, 70000, 1, 40000, 123457});
  const auto r =
      run_cmd({loader_probe_path(), "epoch", files.root(), "--loader-probe=0", "--loader-direct=on",
               "--loader-backend=pread", std::string("--fault=") + fault});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(r.value("rc") == 0);
  BOOST_TEST(r.value("samples") == 5);
  BOOST_TEST(r.value("mismatches") == 0);
  BOOST_TEST(r.value("direct_fallbacks") == 5);  // each file fell back …
  const std::string said = std::string(fault) == "direct-open-einval"
                               ? "O_DIRECT refused by the filesystem"
                               : "O_DIRECT read refused (EINVAL)";
  BOOST_TEST(lines_with(r.err, said) == 1u, r.err);  // … and it was said once
}

BOOST_AUTO_TEST_SUITE_END()
