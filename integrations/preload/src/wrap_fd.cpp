// Calls that create, duplicate or close descriptors keep the fd table
// current. In a vfork child (pid differs) the table, shared with the
// parent, is left alone.
#include <fcntl.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "channels.hpp"
#include "classify.hpp"
#include "fd_table.hpp"
#include "messages.hpp"
#include "real.hpp"
#include "shim.hpp"
#include "socket_reads.hpp"

extern "C" {
int __open(const char*, int, ...);
int __open64(const char*, int, ...);
int __open_2(const char*, int);
int __open64_2(const char*, int);
int __openat_2(int, const char*, int);
int __openat64_2(int, const char*, int);
int __close(int);
}

namespace pl = stallscope::preload;

namespace {

int raw_open(const char* p, int f, ...) {
  va_list ap;
  va_start(ap, f);
  const mode_t m = va_arg(ap, mode_t);
  va_end(ap);
  return static_cast<int>(::syscall(SYS_openat, AT_FDCWD, p, f, m));
}
int raw_openat(int d, const char* p, int f, ...) {
  va_list ap;
  va_start(ap, f);
  const mode_t m = va_arg(ap, mode_t);
  va_end(ap);
  return static_cast<int>(::syscall(SYS_openat, d, p, f, m));
}
int raw_close(int fd) { return static_cast<int>(::syscall(SYS_close, fd)); }

STALLSCOPE_REAL(open, raw_open);
STALLSCOPE_REAL(open64, raw_open);
STALLSCOPE_REAL(__open, raw_open);
STALLSCOPE_REAL(__open64, raw_open);
STALLSCOPE_REAL(openat, raw_openat);
STALLSCOPE_REAL(openat64, raw_openat);
STALLSCOPE_REAL(__open_2, nullptr);
STALLSCOPE_REAL(__open64_2, nullptr);
STALLSCOPE_REAL(__openat_2, nullptr);
STALLSCOPE_REAL(__openat64_2, nullptr);
STALLSCOPE_REAL(creat, nullptr);
STALLSCOPE_REAL(creat64, nullptr);
STALLSCOPE_REAL(close, raw_close);
STALLSCOPE_REAL(__close, raw_close);
STALLSCOPE_REAL(close_range, nullptr);
STALLSCOPE_REAL(closefrom, nullptr);
STALLSCOPE_REAL(dup, nullptr);
STALLSCOPE_REAL(dup2, nullptr);
STALLSCOPE_REAL(dup3, nullptr);
STALLSCOPE_REAL(fcntl, nullptr);
STALLSCOPE_REAL(fcntl64, nullptr);
STALLSCOPE_REAL(pipe, nullptr);
STALLSCOPE_REAL(pipe2, nullptr);
STALLSCOPE_REAL(socketpair, nullptr);
STALLSCOPE_REAL(socket, nullptr);
STALLSCOPE_REAL(eventfd, nullptr);
STALLSCOPE_REAL(epoll_ctl, nullptr);
STALLSCOPE_REAL(lseek, nullptr);
STALLSCOPE_REAL(lseek64, nullptr);

bool owns_table() { return !pl::in_foreign_process(); }

// A new descriptor from a path: classified now when the calling thread may
// be traced, else at its first read.
int opened(int fd, const char* path) {
  if (fd < 0 || !owns_table()) return fd;
  const int saved = errno;
  pl::Guard guard;
  if (guard.entered()) {
    pl::fd_table().write(fd, pl::classify_fd(fd, path));
  } else {
    pl::fd_table().forget(fd);
  }
  errno = saved;
  return fd;
}

int duplicated(int from, int to) {
  if (to >= 0 && owns_table()) pl::fd_table().copy(from, to);
  return to;
}

void new_channel(int a, int b, stallscope::format::ChannelType type) {
  if (!owns_table()) return;
  pl::FdInfo info;
  info.kind = pl::FdKind::kChannel;
  info.channel = pl::channel_new(type);
  if (info.channel == 0) info.kind = pl::FdKind::kForeign;
  pl::fd_table().write(a, info);
  if (b >= 0) pl::fd_table().write(b, info);
}

mode_t mode_arg(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

template <typename Real>
int do_close(Real& real, int fd) {
  auto fn = real.get();
  // Forget before closing: once closed, another thread may reopen the
  // number, and its entry must not be wiped after the fact.
  if (owns_table()) {
    pl::socket_reads_closing(fd);
    pl::channel_closing(fd);
    pl::fd_table().forget(fd);
  }
  return fn(fd);
}

}  // namespace

#define EXPORT STALLSCOPE_SHIM_EXPORT
#define OPEN_WRAPPER(name)                                      \
  EXPORT int name(const char* path, int flags, ...) {           \
    va_list ap;                                                 \
    va_start(ap, flags);                                        \
    const mode_t mode = mode_arg(flags, ap);                    \
    va_end(ap);                                                 \
    return opened(real_##name.get()(path, flags, mode), path);  \
  }
OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)
OPEN_WRAPPER(__open)
OPEN_WRAPPER(__open64)

#define OPENAT_WRAPPER(name)                                         \
  EXPORT int name(int dirfd, const char* path, int flags, ...) {     \
    va_list ap;                                                      \
    va_start(ap, flags);                                             \
    const mode_t mode = mode_arg(flags, ap);                         \
    va_end(ap);                                                      \
    return opened(real_##name.get()(dirfd, path, flags, mode), path); \
  }
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

EXPORT int __open_2(const char* p, int f) { return opened(real___open_2.get()(p, f), p); }
EXPORT int __open64_2(const char* p, int f) { return opened(real___open64_2.get()(p, f), p); }
EXPORT int __openat_2(int d, const char* p, int f) {
  return opened(real___openat_2.get()(d, p, f), p);
}
EXPORT int __openat64_2(int d, const char* p, int f) {
  return opened(real___openat64_2.get()(d, p, f), p);
}
EXPORT int creat(const char* p, mode_t m) { return opened(real_creat.get()(p, m), p); }
EXPORT int creat64(const char* p, mode_t m) { return opened(real_creat64.get()(p, m), p); }

EXPORT int close(int fd) { return do_close(real_close, fd); }
EXPORT int __close(int fd) { return do_close(real___close, fd); }

EXPORT int close_range(unsigned lo, unsigned hi, int flags) {
  if (owns_table() && !(flags & CLOSE_RANGE_CLOEXEC)) pl::fd_table().forget_range(lo, hi);
  return real_close_range.get()(lo, hi, flags);
}
EXPORT void closefrom(int lo) {
  if (owns_table() && lo >= 0) pl::fd_table().forget_range(unsigned(lo), ~0u);
  real_closefrom.get()(lo);
}

EXPORT int dup(int fd) { return duplicated(fd, real_dup.get()(fd)); }
EXPORT int dup2(int fd, int to) {
  if (fd != to && owns_table()) pl::fd_table().forget(to);
  return duplicated(fd, real_dup2.get()(fd, to));
}
EXPORT int dup3(int fd, int to, int flags) {
  if (fd != to && owns_table()) pl::fd_table().forget(to);
  return duplicated(fd, real_dup3.get()(fd, to, flags));
}

namespace {
template <typename Real>
int do_fcntl(Real& real, int fd, int cmd, va_list ap) {
  // Every fcntl argument is an int, a long or a pointer: pass it as a word.
  void* arg = va_arg(ap, void*);
  const int r = real.get()(fd, cmd, arg);
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) return duplicated(fd, r);
  if (cmd == F_SETFL && r == 0 && owns_table()) {
    // A channel switched to non-blocking is polled, not waited on.
    const long fl = reinterpret_cast<long>(arg);
    if (fl & O_NONBLOCK) pl::fd_table().add_flags(fd, pl::kNonBlocking);
  }
  return r;
}
}  // namespace

EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const int r = do_fcntl(real_fcntl, fd, cmd, ap);
  va_end(ap);
  return r;
}
EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const int r = do_fcntl(real_fcntl64, fd, cmd, ap);
  va_end(ap);
  return r;
}

EXPORT int pipe(int fds[2]) {
  const int r = real_pipe.get()(fds);
  if (r == 0) new_channel(fds[0], fds[1], stallscope::format::ChannelType::kPipe);
  return r;
}
EXPORT int pipe2(int fds[2], int flags) {
  const int r = real_pipe2.get()(fds, flags);
  if (r == 0) new_channel(fds[0], fds[1], stallscope::format::ChannelType::kPipe);
  if (r == 0 && (flags & O_NONBLOCK) && owns_table()) {
    pl::fd_table().add_flags(fds[0], pl::kNonBlocking);
  }
  return r;
}
EXPORT int socketpair(int domain, int type, int proto, int fds[2]) {
  const int r = real_socketpair.get()(domain, type, proto, fds);
  if (r == 0) new_channel(fds[0], fds[1], stallscope::format::ChannelType::kSocket);
  if (r == 0 && (type & SOCK_NONBLOCK) && owns_table()) {
    pl::fd_table().add_flags(fds[0], pl::kNonBlocking);
    pl::fd_table().add_flags(fds[1], pl::kNonBlocking);
  }
  return r;
}
EXPORT int socket(int domain, int type, int proto) {
  const int fd = real_socket.get()(domain, type, proto);
  if (fd >= 0 && owns_table()) {
    // Network peers are not our producers, but their bytes are storage
    // (socket_reads.hpp); any other family (unix sockets above all) is foreign.
    pl::FdInfo info;
    info.kind = pl::FdKind::kForeign;
    if (pl::is_network_socket(domain, type)) info = pl::network_socket_info(type);
    pl::fd_table().write(fd, info);
  }
  return fd;
}
EXPORT int eventfd(unsigned init, int flags) {
  const int fd = real_eventfd.get()(init, flags);
  if (fd >= 0) new_channel(fd, -1, stallscope::format::ChannelType::kEventfd);
  if (fd >= 0 && (flags & EFD_NONBLOCK) && owns_table()) {
    pl::fd_table().add_flags(fd, pl::kNonBlocking);
  }
  return fd;
}

EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event* ev) {
  const int r = real_epoll_ctl.get()(epfd, op, fd, ev);
  pl::FdInfo target, ep;
  if (r == 0 && op == EPOLL_CTL_ADD && owns_table() && pl::fd_table().read(fd, &target) &&
      target.kind == pl::FdKind::kChannel && pl::fd_table().read(epfd, &ep) &&
      ep.channel == 0) {
    pl::FdInfo info;
    info.kind = pl::FdKind::kEpoll;
    info.channel = target.channel;
    pl::fd_table().write(epfd, info, ep.gen);
  }
  return r;
}

EXPORT off_t lseek(int fd, off_t off, int whence) {
  const off_t r = real_lseek.get()(fd, off, whence);
  if (r >= 0) pl::fd_table().set_position(fd, static_cast<uint64_t>(r));
  return r;
}
EXPORT off64_t lseek64(int fd, off64_t off, int whence) {
  const off64_t r = real_lseek64.get()(fd, off, whence);
  if (r >= 0) pl::fd_table().set_position(fd, static_cast<uint64_t>(r));
  return r;
}
