// read/pread/readv families, including the fortified (_chk) entry points
// and the 64-bit-offset aliases a -D_FILE_OFFSET_BITS=64 build calls.
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "direct_read.hpp"
#include "io.hpp"
#include "real.hpp"

using stallscope::preload::kTablePosition;
using stallscope::preload::ReadScope;
namespace direct = stallscope::preload::direct;

extern "C" {
ssize_t __read(int, void*, size_t);
ssize_t __pread64(int, void*, size_t, off64_t);
ssize_t __read_chk(int, void*, size_t, size_t);
ssize_t __pread_chk(int, void*, size_t, off_t, size_t);
ssize_t __pread64_chk(int, void*, size_t, off64_t, size_t);
}

namespace {

ssize_t raw_read(int fd, void* buf, size_t n) { return ::syscall(SYS_read, fd, buf, n); }
ssize_t raw_pread(int fd, void* buf, size_t n, off_t off) {
  return ::syscall(SYS_pread64, fd, buf, n, off);
}
ssize_t raw_pread64(int fd, void* buf, size_t n, off64_t off) {
  return ::syscall(SYS_pread64, fd, buf, n, off);
}

STALLSCOPE_REAL(read, raw_read);
STALLSCOPE_REAL(__read, raw_read);
STALLSCOPE_REAL(__read_chk, nullptr);
STALLSCOPE_REAL(pread, raw_pread);
STALLSCOPE_REAL(pread64, raw_pread64);
STALLSCOPE_REAL(__pread64, raw_pread64);
STALLSCOPE_REAL(__pread_chk, nullptr);
STALLSCOPE_REAL(__pread64_chk, nullptr);
STALLSCOPE_REAL(readv, nullptr);
STALLSCOPE_REAL(preadv, nullptr);
STALLSCOPE_REAL(preadv64, nullptr);
STALLSCOPE_REAL(preadv2, nullptr);
STALLSCOPE_REAL(preadv64v2, nullptr);

uint64_t iov_bytes(const iovec* iov, int n) {
  uint64_t sum = 0;
  for (int i = 0; i < n && iov != nullptr; ++i) sum += iov[i].iov_len;
  return sum;
}

// The first buffer of a vector read, where a message's first bytes land
// (ReadScope: contiguous for min(len, 8) bytes).
const void* first_buf(const iovec* iov, int n) {
  if (iov == nullptr || n < 1) return nullptr;
  return n == 1 || iov[0].iov_len >= 8 ? iov[0].iov_base : nullptr;
}

uint64_t at(off64_t off) { return off < 0 ? kTablePosition : static_cast<uint64_t>(off); }

// ReadScope keeps the errno the call set (io.hpp): no save here.
template <typename Real, typename... Args>
inline ssize_t traced(Real& real, const void* buf, int fd, uint64_t offset, uint64_t len,
                      Args... args) {
  auto fn = real.get();
  if (__builtin_expect(fn == nullptr, 0)) {
    errno = ENOSYS;
    return -1;
  }
  ReadScope scope(fd, offset, len, false, buf);
  const ssize_t n = fn(fd, args...);
  scope.done(n);
  return n;
}

// The same for read and pread, whose reads of local files make the system
// call themselves where direct_read.hpp allows it. `fits` is false when a
// fortified caller's buffer is too small: libc's _chk function then reports
// the overflow.
template <typename Real, typename... Args>
inline ssize_t traced_read(Real& real, bool fits, int fd, void* buf, size_t n, Args... args) {
  auto fn = real.get();
  if (__builtin_expect(fn == nullptr, 0)) {
    errno = ENOSYS;
    return -1;
  }
  ReadScope scope(fd, kTablePosition, n, false, buf);
  const ssize_t got = __builtin_expect(scope.direct() && fits, 1) ? direct::read(fd, buf, n)
                                                                   : fn(fd, buf, n, args...);
  scope.done(got);
  return got;
}
template <typename Real, typename... Args>
inline ssize_t traced_pread(Real& real, bool fits, int fd, void* buf, size_t n, off64_t off,
                            Args... args) {
  auto fn = real.get();
  if (__builtin_expect(fn == nullptr, 0)) {
    errno = ENOSYS;
    return -1;
  }
  ReadScope scope(fd, at(off), n);
  const ssize_t got = __builtin_expect(scope.direct() && fits, 1)
                          ? direct::pread(fd, buf, n, off)
                          : fn(fd, buf, n, off, args...);
  scope.done(got);
  return got;
}

// True when `real` resolves to a function of the object `libc_base`.
template <typename Real>
bool is_libc(Real& real, const void* libc_base) {
  Dl_info info{};
  const auto fn = reinterpret_cast<void*>(real.get());
  return fn != nullptr && ::dladdr(fn, &info) != 0 && info.dli_fbase == libc_base;
}

}  // namespace

// hot: the wrappers sit together in .text.hot, so that a read's path touches
// few code pages (each is likely a TLB miss after the system call).
#define EXPORT STALLSCOPE_SHIM_EXPORT __attribute__((hot))

EXPORT ssize_t read(int fd, void* buf, size_t n) {
  return traced_read(real_read, true, fd, buf, n);
}
EXPORT ssize_t __read(int fd, void* buf, size_t n) {
  return traced(real___read, buf, fd, kTablePosition, n, buf, n);
}
EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  return traced_read(real___read_chk, n <= buflen, fd, buf, n, buflen);
}
EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  return traced_pread(real_pread, true, fd, buf, n, off);
}
EXPORT ssize_t pread64(int fd, void* buf, size_t n, off64_t off) {
  return traced_pread(real_pread64, true, fd, buf, n, off);
}
EXPORT ssize_t __pread64(int fd, void* buf, size_t n, off64_t off) {
  return traced_pread(real___pread64, true, fd, buf, n, off);
}
EXPORT ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  return traced_pread(real___pread_chk, n <= buflen, fd, buf, n, off, buflen);
}
EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t off, size_t buflen) {
  return traced_pread(real___pread64_chk, n <= buflen, fd, buf, n, off, buflen);
}
EXPORT ssize_t readv(int fd, const iovec* iov, int cnt) {
  return traced(real_readv, first_buf(iov, cnt), fd, kTablePosition, iov_bytes(iov, cnt), iov,
                cnt);
}
EXPORT ssize_t preadv(int fd, const iovec* iov, int cnt, off_t off) {
  return traced(real_preadv, nullptr, fd, at(off), iov_bytes(iov, cnt), iov, cnt, off);
}
EXPORT ssize_t preadv64(int fd, const iovec* iov, int cnt, off64_t off) {
  return traced(real_preadv64, nullptr, fd, at(off), iov_bytes(iov, cnt), iov, cnt, off);
}
EXPORT ssize_t preadv2(int fd, const iovec* iov, int cnt, off_t off, int flags) {
  return traced(real_preadv2, nullptr, fd, at(off), iov_bytes(iov, cnt), iov, cnt, off, flags);
}
EXPORT ssize_t preadv64v2(int fd, const iovec* iov, int cnt, off64_t off, int flags) {
  return traced(real_preadv64v2, nullptr, fd, at(off), iov_bytes(iov, cnt), iov, cnt, off, flags);
}

// Cancelling a thread ends direct reads for good (direct_read.hpp), before
// the cancellation is requested: the target's next read goes through libc,
// which acts on it.
STALLSCOPE_REAL(pthread_cancel, nullptr);
STALLSCOPE_SHIM_EXPORT int pthread_cancel(pthread_t thread) {
  stallscope::preload::g_direct_reads.store(false, std::memory_order_seq_cst);
  auto fn = real_pthread_cancel.get();
  return fn != nullptr ? fn(thread) : ESRCH;
}

namespace stallscope::preload {

std::atomic<bool> g_direct_reads{false};

void direct_reads_init() noexcept {
  if (!kDirectReadsBuilt || !config().direct_reads) return;
  Dl_info libc{};
  if (::dladdr(reinterpret_cast<void*>(&::gnu_get_libc_version), &libc) == 0) return;
  const void* base = libc.dli_fbase;
  const bool own = is_libc(real_read, base) && is_libc(real___read_chk, base) &&
                   is_libc(real_pread, base) && is_libc(real_pread64, base) &&
                   is_libc(real___pread64, base) && is_libc(real___pread_chk, base) &&
                   is_libc(real___pread64_chk, base);
  g_direct_reads.store(own, std::memory_order_seq_cst);
}

}  // namespace stallscope::preload
