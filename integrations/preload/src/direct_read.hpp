// Reads of local files made with the system call itself instead of libc's
// function. A traced read then has one frame fewer open across its system
// call: when the kernel comes back the return predictor no longer holds the
// program's returns, so each return out of such a frame is likely
// mispredicted, and libc's read or pread adds one, plus its cancellation
// bookkeeping (together about 12-15 ns of a 560 ns page-cached 4 KiB pread,
// docs/performance.md).
//
// Only where nothing is lost by it:
//   - the next definition of every read and pread name after the shim is
//     libc's own (no other interposer, such as Darshan or an I/O
//     forwarding library, sits between the shim and libc), checked once by
//     direct_reads_init();
//   - the descriptor is a regular file on a local or memory filesystem: a
//     read there never waits long, so a thread cancelled meanwhile is
//     cancelled at its next cancellation point instead (network and FUSE
//     reads, which may hang, keep libc's function, whose cancellation
//     interrupts them);
//   - no thread was ever cancelled: the shim's pthread_cancel() turns the
//     direct reads off for good before it forwards the call, so a pending
//     cancellation acts at the target's next read as libc's would;
//   - x86-64 (elsewhere every read goes through libc);
//   - STALLSCOPE_PRELOAD_DIRECT is not "off".
// Errors come back as libc's would: -1 with errno set.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

namespace stallscope::preload {

#if defined(__x86_64__)
inline constexpr bool kDirectReadsBuilt = true;
#else
inline constexpr bool kDirectReadsBuilt = false;
#endif

// True once direct_reads_init() found libc's own read functions next, until
// the first pthread_cancel().
extern std::atomic<bool> g_direct_reads;

// Called once by the shim's constructor, before any read is traced.
void direct_reads_init() noexcept;

namespace direct {

#if defined(__x86_64__)
inline long syscall4(long nr, long a, long b, long c, long d) noexcept {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
}
inline ssize_t result(long ret) noexcept {
  if (__builtin_expect(ret < 0 && ret > -4096, 0)) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return ret;
}
inline ssize_t read(int fd, void* buf, size_t n) noexcept {
  return result(syscall4(SYS_read, fd, reinterpret_cast<long>(buf), static_cast<long>(n), 0));
}
inline ssize_t pread(int fd, void* buf, size_t n, off64_t off) noexcept {
  return result(
      syscall4(SYS_pread64, fd, reinterpret_cast<long>(buf), static_cast<long>(n), off));
}
#else  // never called: direct_reads_init() leaves g_direct_reads false
inline ssize_t read(int fd, void* buf, size_t n) noexcept { return ::syscall(SYS_read, fd, buf, n); }
inline ssize_t pread(int fd, void* buf, size_t n, off64_t off) noexcept {
  return ::syscall(SYS_pread64, fd, buf, n, off);
}
#endif

}  // namespace direct
}  // namespace stallscope::preload
