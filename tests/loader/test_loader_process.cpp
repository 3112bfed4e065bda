// Per-process rings (and pread threads) after fork, and io_uring refused by
// seccomp (RELIABILITY.md 20, 25).
#include <sys/wait.h>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "loader_fixtures.hpp"
#include "stallscope/loader/storage.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

// Reads `n` 4 KiB blocks of `fd` through `r`; returns how many came back
// complete and correct, or -1 on any stray or wrong completion.
int read_blocks(sl::StorageReader& r, int fd, const std::vector<char>& want, int n) {
  std::vector<char> buf(static_cast<size_t>(n) * 4096);
  int ok = 0, submitted = 0, reaped = 0;
  sl::Completion c[16];
  while (reaped < n) {
    while (submitted < n && r.in_flight() < r.capacity()) {
      sl::ReadRequest q{fd, uint64_t(submitted) * 4096, 4096, buf.data() + submitted * 4096,
                        uint64_t(submitted)};
      if (r.submit({&q, 1}) != 1) break;
      ++submitted;
    }
    const int k = r.reap(c, 1, 1000);
    if (k <= 0) return -1;
    for (int i = 0; i < k; ++i, ++reaped) {
      if (c[i].user_data >= uint64_t(n) || c[i].res != 4096) return -1;
      const size_t at = c[i].user_data * 4096;
      ok += std::memcmp(buf.data() + at, want.data() + at, 4096) == 0;
    }
  }
  return r.in_flight() == 0 ? ok : -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_process)

// io_uring: a ring per process; pread: the child starts its own threads
// (the parent's are not in it) and never sees the parent's requests.
BOOST_DATA_TEST_CASE(forked_child_uses_its_own_ring_or_threads,
                     boost::unit_test::data::make({sl::Backend::kUring, sl::Backend::kPread}),
                     backend) {
  TempDir d;
  write_file(d / "f", 64 * 4096, 9);
  const auto want = content(9, 64 * 4096);
  const int fd = ::open((d / "f").c_str(), O_RDONLY);
  int err = 0;
  auto r = backend == sl::Backend::kUring ? sl::make_uring_reader({8, 1}, sl::real_sys(), &err)
                                          : sl::make_pread_reader({8, 3}, sl::real_sys(), &err);
  BOOST_REQUIRE_MESSAGE(r, "the backend must work on this kernel: " << std::strerror(-err));
  BOOST_REQUIRE_EQUAL(read_blocks(*r, fd, want, 64), 64);  // the parent's ring is set up
  const pid_t pid = ::fork();
  if (pid == 0) {  // the child reads through the same object: it must get a new ring
    const int got = read_blocks(*r, fd, want, 64);
    ::_exit(got == 64 ? 0 : 1);
  }
  // Meanwhile the parent keeps reading: a shared ring would lose or steal completions.
  BOOST_TEST(read_blocks(*r, fd, want, 64) == 64);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
  BOOST_TEST(read_blocks(*r, fd, want, 64) == 64);
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(seccomp_refusing_io_uring_falls_back_to_pread_with_the_reason) {
  FileSet files({1, 4097, 70000, 0, 123456, 9});
  for (const char* err : {"ENOSYS", "EPERM"}) {
    BOOST_TEST_CONTEXT(err) {
      const auto r =
          run_cmd({loader_probe_path(), "seccomp", err, files.root(), "--loader-probe=1"});
      BOOST_REQUIRE_EQUAL(r.exit_code, 0);
      BOOST_TEST(r.out.find("backend pread") != std::string::npos, r.out);
      BOOST_TEST(r.value("samples") == 6);
      BOOST_TEST(r.value("mismatches") == 0);
      const std::string reason = std::string("io_uring unavailable: ") +
                                 std::strerror(std::string(err) == "EPERM" ? EPERM : ENOSYS);
      BOOST_TEST(r.err.find(reason) != std::string::npos, r.err);
      size_t said = 0;  // said once
      for (size_t at = 0; (at = r.err.find("storage backend:", at)) != std::string::npos; ++at)
        ++said;
      BOOST_TEST(said == 1u);
    }
  }
  const auto plain = run_cmd({loader_probe_path(), "epoch", files.root()});
  BOOST_TEST(plain.out.find("backend uring") != std::string::npos, plain.out);
}

BOOST_AUTO_TEST_SUITE_END()
