// The pass-through syscall seam.
#include "stallscope/loader/sys.hpp"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cachestat.hpp"

namespace stallscope::loader {

int Sys::open(const char* path, int flags) noexcept { return ::open(path, flags | O_CLOEXEC); }
int Sys::close(int fd) noexcept { return ::close(fd); }
int Sys::fstat(int fd, struct stat* st) noexcept { return ::fstat(fd, st); }
int Sys::fstatfs(int fd, struct statfs* st) noexcept { return ::fstatfs(fd, st); }

ssize_t Sys::preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept {
  return ::preadv2(fd, iov, n, off, flags);
}

long Sys::cachestat_pages(int fd, uint64_t off, uint64_t len) noexcept {
  detail::CachestatRange range{off, len};
  detail::Cachestat cs{};
  if (detail::cachestat(fd, &range, &cs) != 0) return -errno;
  return static_cast<long>(cs.nr_cache);
}

int Sys::uring_init(unsigned entries, io_uring* ring, io_uring_params* p) noexcept {
  return io_uring_queue_init_params(entries, ring, p);
}
void Sys::uring_exit(io_uring* ring) noexcept { io_uring_queue_exit(ring); }
int Sys::uring_register_buffers(io_uring* ring, const iovec* iov, unsigned n) noexcept {
  return io_uring_register_buffers(ring, iov, n);
}
int Sys::uring_submit(io_uring* ring) noexcept { return io_uring_submit(ring); }
int Sys::uring_wait(io_uring* ring, io_uring_cqe** cqe, __kernel_timespec* ts) noexcept {
  return io_uring_wait_cqe_timeout(ring, cqe, ts);
}
void Sys::uring_filter(int32_t&, uint64_t) noexcept {}

int64_t Sys::monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Sys& real_sys() noexcept {
  static Sys sys;
  return sys;
}

}  // namespace stallscope::loader
