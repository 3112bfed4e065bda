// How many of a program's descriptors stallscope may hold, and where
// (RELIABILITY.md 36). Header-only and raw system calls, so that the
// recorder, its sampler and the preload shim (whose own fcntl/close
// wrappers must not see these) share one policy.
//
//   soft RLIMIT_NOFILE   stallscope
//   < kMinNofile         tracing off, one note: every descriptor is the program's
//   < kKeepStatsNofile   the trace file and 4 sampler files; per-thread stat files
//                        opened for each read instead of kept
//   otherwise            as above, plus per-thread stat files up to 1/8 of the limit
//
// Descriptors it keeps are moved to fd_floor() and up, so a program that
// expects the lowest free number (a closed stdin reopened as 0, numbers
// handed out in order) gets it.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace stallscope::sys {

inline constexpr uint64_t kMinNofile = 64;
inline constexpr uint64_t kKeepStatsNofile = 256;
// Where kept descriptors go when the limit allows: numbers programs rarely
// reach by counting up.
inline constexpr int kHighFd = 700;

// The soft RLIMIT_NOFILE; UINT64_MAX when unlimited or unknown.
inline uint64_t nofile_limit() noexcept {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return static_cast<uint64_t>(lim.rlim_cur);
}

// The lowest number a kept descriptor may take under `limit`: kHighFd, or
// the upper half of the numbers where kHighFd is past half the limit.
// Never 0-2.
inline int fd_floor(uint64_t limit) noexcept {
  if (limit >= 2 * uint64_t{kHighFd}) return kHighFd;
  const uint64_t half = limit / 2;
  return half < 3 ? 3 : static_cast<int>(half);
}

// Moves `fd` (O_CLOEXEC kept) to fd_floor() or above and closes the old
// number; returns the descriptor to use: `fd` itself when it is already
// high enough or no higher number is free, except that 0-2 are never kept
// (then -1, errno EMFILE, `fd` closed).
inline int move_fd_high(int fd) noexcept {
  const int floor = fd_floor(nofile_limit());
  if (fd < 0 || fd >= floor) return fd;
  long high = ::syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0 && fd < 3) high = ::syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 3);
  if (high < 0 && fd >= 3) return fd;
  ::syscall(SYS_close, fd);
  if (high < 0) errno = EMFILE;
  return static_cast<int>(high);
}

}  // namespace stallscope::sys
