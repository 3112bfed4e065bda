// Channel traffic: writes mark who feeds a channel (a producer thread or a
// forked worker) and when; receives on such a channel are assembled into
// messages, each a hand-off and, when it blocked, a data wait
// (messages.hpp), and a blocking poll of it is the start of the message
// read next. Reads of channels go through the read wrappers. Receives
// from network sockets are storage reads (socket_reads.hpp), and a poll
// for one socket's input is the wait of the read that follows it.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "channels.hpp"
#include "io.hpp"
#include "real.hpp"

namespace pl = stallscope::preload;

extern "C" {
ssize_t __write(int, const void*, size_t);
ssize_t __recv_chk(int, void*, size_t, size_t, int);
ssize_t __recvfrom_chk(int, void*, size_t, size_t, int, sockaddr*, socklen_t*);
}

namespace {

STALLSCOPE_REAL(write, nullptr);
STALLSCOPE_REAL(__write, nullptr);
STALLSCOPE_REAL(writev, nullptr);
STALLSCOPE_REAL(send, nullptr);
STALLSCOPE_REAL(sendto, nullptr);
STALLSCOPE_REAL(sendmsg, nullptr);
STALLSCOPE_REAL(recv, nullptr);
STALLSCOPE_REAL(recvfrom, nullptr);
STALLSCOPE_REAL(recvmsg, nullptr);
STALLSCOPE_REAL(__recv_chk, nullptr);
STALLSCOPE_REAL(__recvfrom_chk, nullptr);
STALLSCOPE_REAL(poll, nullptr);
STALLSCOPE_REAL(ppoll, nullptr);
STALLSCOPE_REAL(select, nullptr);
STALLSCOPE_REAL(pselect, nullptr);
STALLSCOPE_REAL(epoll_wait, nullptr);
STALLSCOPE_REAL(epoll_pwait, nullptr);

// One table lookup; the board is touched only for channels. Marked before
// the write: the reader it wakes checks the board as soon as it returns.
void writing(int fd) {
  pl::FdInfo info;
  if (pl::fd_table().read(fd, &info) && info.kind == pl::FdKind::kChannel) {
    pl::channel_note_write(info.channel);
  }
}

// A receive: a data wait on a channel (unless MSG_DONTWAIT), a storage read
// of a network socket. MSG_PEEK leaves the bytes for the next receive, which
// records them: not traced.
template <typename R, typename Fn>
R received(int fd, const void* buf, uint64_t len, int flags, Fn call) {
  if (flags & MSG_PEEK) return call();
  pl::ReadScope scope(fd, pl::kTablePosition, len, (flags & MSG_DONTWAIT) != 0, buf);
  const R r = call();
  scope.done(r);  // keeps the errno the call set (io.hpp)
  return r;
}

template <typename R, typename Fn>
R polled(const pollfd* fds, nfds_t n, bool blocking, Fn call) {
  pl::WaitScope scope;
  if (blocking) {
    for (nfds_t i = 0; i < n; ++i) scope.consider(fds[i].fd, (fds[i].events & POLLIN) != 0);
  }
  const R r = call();
  const int saved = errno;
  if (blocking && r > 0) scope.done();
  errno = saved;
  return r;
}

template <typename Fn>
int selected(int n, fd_set* rd, bool blocking, Fn call) {
  pl::WaitScope scope;
  if (blocking && rd != nullptr) {
    for (int fd = 0; fd < n && fd < FD_SETSIZE; ++fd) if (FD_ISSET(fd, rd)) scope.consider(fd);
  }
  const int r = call();
  const int saved = errno;
  if (blocking && r > 0) scope.done();
  errno = saved;
  return r;
}

template <typename Fn>
int epolled(int epfd, bool blocking, Fn call) {
  pl::WaitScope scope;
  if (blocking) scope.consider(epfd);
  const int r = call();
  const int saved = errno;
  if (blocking && r > 0) scope.done();
  errno = saved;
  return r;
}

bool blocks(const timespec* ts) { return ts == nullptr || ts->tv_sec > 0 || ts->tv_nsec > 0; }
bool blocks(const timeval* tv) { return tv == nullptr || tv->tv_sec > 0 || tv->tv_usec > 0; }

}  // namespace

#define EXPORT STALLSCOPE_SHIM_EXPORT

EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  writing(fd);
  return real_write.get()(fd, buf, n);
}
EXPORT ssize_t __write(int fd, const void* buf, size_t n) {
  writing(fd);
  return real___write.get()(fd, buf, n);
}
EXPORT ssize_t writev(int fd, const iovec* iov, int cnt) {
  writing(fd);
  return real_writev.get()(fd, iov, cnt);
}
EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  writing(fd);
  return real_send.get()(fd, buf, n, flags);
}
EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* a,
                      socklen_t al) {
  writing(fd);
  return real_sendto.get()(fd, buf, n, flags, a, al);
}
EXPORT ssize_t sendmsg(int fd, const msghdr* m, int flags) {
  writing(fd);
  return real_sendmsg.get()(fd, m, flags);
}

// hot: with the read wrappers (wrap_read.cpp), few code pages per receive.
#define HOT_EXPORT STALLSCOPE_SHIM_EXPORT __attribute__((hot))

HOT_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  return received<ssize_t>(fd, buf, n, flags, [&] { return real_recv.get()(fd, buf, n, flags); });
}
HOT_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  return received<ssize_t>(fd, buf, n, flags,
                           [&] { return real___recv_chk.get()(fd, buf, n, buflen, flags); });
}
HOT_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* a, socklen_t* al) {
  return received<ssize_t>(fd, buf, n, flags,
                           [&] { return real_recvfrom.get()(fd, buf, n, flags, a, al); });
}
HOT_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* a,
                              socklen_t* al) {
  return received<ssize_t>(
      fd, buf, n, flags, [&] { return real___recvfrom_chk.get()(fd, buf, n, buflen, flags, a, al); });
}
HOT_EXPORT ssize_t recvmsg(int fd, msghdr* m, int flags) {
  uint64_t len = 0;
  for (size_t i = 0; m != nullptr && m->msg_iov != nullptr && i < m->msg_iovlen; ++i) {
    len += m->msg_iov[i].iov_len;
  }
  const void* first = nullptr;
  if (m != nullptr && m->msg_iov != nullptr && m->msg_iovlen >= 1 &&
      (m->msg_iovlen == 1 || m->msg_iov[0].iov_len >= 8)) {
    first = m->msg_iov[0].iov_base;
  }
  return received<ssize_t>(fd, first, len, flags,
                           [&] { return real_recvmsg.get()(fd, m, flags); });
}

EXPORT int poll(pollfd* fds, nfds_t n, int timeout) {
  return polled<int>(fds, n, timeout != 0, [&] { return real_poll.get()(fds, n, timeout); });
}
EXPORT int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
  return polled<int>(fds, n, blocks(ts), [&] { return real_ppoll.get()(fds, n, ts, mask); });
}
EXPORT int select(int n, fd_set* rd, fd_set* wr, fd_set* ex, timeval* tv) {
  return selected(n, rd, blocks(tv), [&] { return real_select.get()(n, rd, wr, ex, tv); });
}
EXPORT int pselect(int n, fd_set* rd, fd_set* wr, fd_set* ex, const timespec* ts,
                   const sigset_t* mask) {
  return selected(n, rd, blocks(ts), [&] { return real_pselect.get()(n, rd, wr, ex, ts, mask); });
}
EXPORT int epoll_wait(int epfd, epoll_event* ev, int max, int timeout) {
  return epolled(epfd, timeout != 0, [&] { return real_epoll_wait.get()(epfd, ev, max, timeout); });
}
EXPORT int epoll_pwait(int epfd, epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  return epolled(epfd, timeout != 0,
                 [&] { return real_epoll_pwait.get()(epfd, ev, max, timeout, mask); });
}
