// An owned file descriptor, closed when it goes out of scope.
//
//   internal::Fd fd = internal::Fd::open_read(path);  // O_NONBLOCK: a FIFO never blocks
//   if (!fd) fail(path, errno);
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace stallscope::internal {

class Fd {
 public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  // Read-only, close-on-exec and O_NONBLOCK, so that a FIFO or device is
  // refused by the caller's checks instead of waited on; -1 and errno set
  // on failure.
  static Fd open_read(const std::string& path) noexcept {
    return Fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  }
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace stallscope::internal
