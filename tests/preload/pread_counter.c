/* Another interposer of pread, preloaded after the shim (as an I/O
 * profiler or forwarding library would be): counts the calls that reach it,
 * per descriptor, and forwards them to libc. The shim must hand every read
 * on to it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

#define EXPORT __attribute__((visibility("default")))

enum { kFds = 1024 };
static long g_calls[kFds];

/* Calls that reached this pread for descriptor `fd`. */
EXPORT long pread_counter_calls(int fd) {
  return fd >= 0 && fd < kFds ? __atomic_load_n(&g_calls[fd], __ATOMIC_RELAXED) : -1;
}

EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  static ssize_t (*next)(int, void*, size_t, off_t);
  if (next == NULL) next = (ssize_t(*)(int, void*, size_t, off_t))dlsym(RTLD_NEXT, "pread");
  if (next == NULL) {
    errno = ENOSYS;
    return -1;
  }
  if (fd >= 0 && fd < kFds) __atomic_add_fetch(&g_calls[fd], 1, __ATOMIC_RELAXED);
  return next(fd, buf, n, off);
}
