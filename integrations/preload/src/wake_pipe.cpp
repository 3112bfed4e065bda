#include "wake_pipe.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::preload {

bool WakePipe::open() noexcept {
  int fds[2];
  if (::syscall(SYS_pipe2, fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  // Away from the numbers the program counts on (stallscope/internal/fd_limits.hpp).
  fds[0] = sys::move_fd_high(fds[0]);
  fds[1] = sys::move_fd_high(fds[1]);
  struct stat st {};
  if (fds[0] < 0 || fds[1] < 0 || ::syscall(SYS_fstat, fds[0], &st) != 0) {
    if (fds[0] >= 0) ::syscall(SYS_close, fds[0]);
    if (fds[1] >= 0) ::syscall(SYS_close, fds[1]);
    return false;
  }
  r_ = fds[0];
  w_ = fds[1];
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return true;
}

bool WakePipe::ours(int fd) const noexcept {
  struct stat st {};
  return fd >= 0 && ::syscall(SYS_fstat, fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void WakePipe::wake() noexcept {
  if (!ours(w_)) return;
  const char one = 1;
  (void)!::syscall(SYS_write, w_, &one, 1);  // full pipe (EAGAIN): already awake
}

bool WakePipe::clear() noexcept {
  if (!ours(r_)) return false;
  char buf[64];
  while (::syscall(SYS_read, r_, buf, sizeof buf) > 0) {
  }
  return true;
}

void WakePipe::close() noexcept {
  if (ours(r_)) ::syscall(SYS_close, r_);
  if (ours(w_)) ::syscall(SYS_close, w_);
  r_ = w_ = -1;
}

}  // namespace stallscope::preload
