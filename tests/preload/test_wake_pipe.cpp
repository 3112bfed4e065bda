// White-box: the page-fault sampler's wake-up pipe never reads from or
// writes into a descriptor the program closed and reused (RELIABILITY.md 5).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "wake_pipe.hpp"

using namespace stallscope::preload;

namespace {
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(wake_pipe)

BOOST_AUTO_TEST_CASE(wakes_and_clears) {
  WakePipe w;
  BOOST_REQUIRE(w.open());
  BOOST_CHECK(!readable(w.read_fd()));
  w.wake();
  w.wake();
  BOOST_CHECK(readable(w.read_fd()));
  BOOST_CHECK(w.clear());
  BOOST_CHECK(!readable(w.read_fd()));
  w.close();
}

BOOST_AUTO_TEST_CASE(leaves_a_reused_descriptor_of_the_program_alone) {
  WakePipe w;
  BOOST_REQUIRE(w.open());
  const int r = w.read_fd();
  // The program closes both ends (the write end is the next number) and
  // puts a pipe of its own at the same numbers, with data of its own in it.
  ::close(r);
  ::close(r + 1);
  int fresh[2];
  BOOST_REQUIRE_EQUAL(::pipe2(fresh, O_NONBLOCK), 0);
  const int mine[2] = {::dup2(fresh[0], r), ::dup2(fresh[1], r + 1)};
  ::close(fresh[0]);
  ::close(fresh[1]);
  BOOST_REQUIRE_EQUAL(mine[0], r);
  BOOST_REQUIRE_EQUAL(mine[1], r + 1);
  w.wake();  // must not write into the program's pipe
  BOOST_CHECK(!readable(mine[0]));
  BOOST_REQUIRE_EQUAL(::write(mine[1], "x", 1), 1);
  BOOST_CHECK(!w.clear());  // must not read the program's byte
  char c = 0;
  BOOST_CHECK_EQUAL(::read(mine[0], &c, 1), 1);
  BOOST_CHECK_EQUAL(c, 'x');
  w.close();  // must not close the program's pipe
  BOOST_CHECK_EQUAL(::fcntl(mine[0], F_GETFD), 0);
  BOOST_CHECK_EQUAL(::fcntl(mine[1], F_GETFD), 0);
  ::close(mine[0]);
  ::close(mine[1]);
}

BOOST_AUTO_TEST_CASE(keeps_off_the_low_numbers_the_program_counts_on) {
  WakePipe w;
  BOOST_REQUIRE(w.open());
  BOOST_CHECK_GE(w.read_fd(), 32);  // the upper half of any limit it runs under
  const int next = ::open("/dev/null", O_RDONLY);
  BOOST_CHECK_LT(next, 32);  // the program's next number is the low one it expects
  ::close(next);
  w.close();
}

BOOST_AUTO_TEST_SUITE_END()
