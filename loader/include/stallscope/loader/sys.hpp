// stallscope loader — the syscall seam.
//
// Every system call the storage readers make goes through a Sys object, so
// tests can substitute fakes that return EINVAL, ENOMEM, EAGAIN, EINTR,
// ECANCELED or short counts (RELIABILITY.md 20-23) without privileges the
// test host refuses to drop. real_sys() is the pass-through; calls return
// what the kernel returned (-errno style where liburing does, -1/errno for
// the POSIX calls as their man pages say). Implementations must be
// thread-safe: the pread backend calls them from several threads.
#pragma once

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

struct io_uring;
struct io_uring_cqe;
struct io_uring_params;
struct __kernel_timespec;

#include "stallscope/loader/export.hpp"

namespace stallscope::loader {

class STALLSCOPE_LOADER_API Sys {
 public:
  virtual ~Sys() = default;
  // POSIX calls: result and errno as the libc call.
  virtual int open(const char* path, int flags) noexcept;
  virtual int close(int fd) noexcept;
  virtual int fstat(int fd, struct stat* st) noexcept;
  virtual int fstatfs(int fd, struct statfs* st) noexcept;
  virtual ssize_t preadv2(int fd, const iovec* iov, int n, off_t off, int flags) noexcept;
  // cachestat(2) over [off, off+len): pages cached, or -errno.
  virtual long cachestat_pages(int fd, uint64_t off, uint64_t len) noexcept;
  // liburing calls: 0/count or -errno, as liburing returns them.
  virtual int uring_init(unsigned entries, io_uring* ring, io_uring_params* p) noexcept;
  virtual void uring_exit(io_uring* ring) noexcept;
  virtual int uring_register_buffers(io_uring* ring, const iovec* iov, unsigned n) noexcept;
  virtual int uring_submit(io_uring* ring) noexcept;
  virtual int uring_wait(io_uring* ring, io_uring_cqe** cqe, __kernel_timespec* ts) noexcept;
  // Sees (and a fake may rewrite) each completion's result before the
  // reader does; `user_data` identifies the request.
  virtual void uring_filter(int32_t& res, uint64_t user_data) noexcept;
  // CLOCK_MONOTONIC in nanoseconds: the storage probe's deadlines (a fake
  // may move it as it likes, e.g. only when a read is issued).
  virtual int64_t monotonic_ns() noexcept;
};

// The process-wide pass-through seam.
STALLSCOPE_LOADER_API Sys& real_sys() noexcept;

}  // namespace stallscope::loader
