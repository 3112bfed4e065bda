#include "socket_reads.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "stallscope/internal/inline_records.hpp"
#include "shim.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/format.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::preload {

namespace {

// A read this soon after the thread's poll for its socket returned is that
// poll's read (CPython, urllib3 and botocore poll a socket with a timeout,
// then recv; the GIL is taken back in between, and a busy core may run
// another thread for a time slice of a few ms).
constexpr double kPollGapNs = 10e6;

// Short reads of one socket, summed until their time reaches the minimum.
struct Pending {
  int fd = -1;
  uint32_t file = 0;
  uint64_t bytes = 0, ticks = 0, end = 0, offset = 0;
};
thread_local constinit Pending t_pending __attribute__((tls_model("initial-exec")));

// The thread's last blocking poll/select for input on one socket.
struct PollSeen {
  int fd = -1;
  uint64_t t0 = 0, t1 = 0;
};
thread_local constinit PollSeen t_poll __attribute__((tls_model("initial-exec")));

// In ticks, set once the clock is calibrated (no conversion per read).
uint64_t g_min_ticks = 0;
uint64_t g_gap_ticks = 0;

void emit(uint32_t file, uint64_t t0, uint64_t t1, uint64_t bytes, uint64_t offset) {
  StorageRead r;
  r.file = file;
  r.bytes = bytes;
  r.offset = offset;
  r.tier = format::Tier::kNetwork;
  // No page cache in front of a socket: every byte came from the peer.
  r.cache = format::Cache::kMiss;
  r.cache_method = format::CacheMethod::kTier;
  stallscope::detail::emit_storage_read(t0, t1, r);
}

// The sum ends where its last read ended and lasts as long as its reads
// did together, so it stays inside the sample that made that read.
void flush() {
  const Pending p = t_pending;
  t_pending = Pending{};
  if (p.fd >= 0 && p.bytes > 0) emit(p.file, p.end - p.ticks, p.end, p.bytes, p.offset);
}

long sys_sockopt(int fd, int opt, int* value) {
  socklen_t len = sizeof *value;
  return ::syscall(SYS_getsockopt, fd, SOL_SOCKET, opt, value, &len);
}

// "tcp:10.0.0.5:443", "tcp:[2001:db8::1]:443", "udp:…"; a datagram socket
// with no peer is named by its own address.
uint32_t peer_name(int fd) {
  int type = 0;
  (void)sys_sockopt(fd, SO_TYPE, &type);
  sockaddr_storage a{};
  socklen_t alen = sizeof a;
  bool local = false;
  if (::syscall(SYS_getpeername, fd, &a, &alen) != 0) {
    local = true;
    alen = sizeof a;
    if (::syscall(SYS_getsockname, fd, &a, &alen) != 0) a.ss_family = AF_UNSPEC;
  }
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  bool v6 = false;
  if (a.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    port = ntohs(s->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    port = ntohs(s->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
      ::inet_ntop(AF_INET, &s->sin6_addr.s6_addr[12], host, sizeof host);
    } else {
      v6 = ::inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host) != nullptr;
    }
  }
  char name[128];
  std::snprintf(name, sizeof name, v6 ? "%s:[%s]:%u%s" : "%s:%s:%u%s",
                type == SOCK_DGRAM ? "udp" : "tcp", host, port,
                local ? " (unconnected; local address)" : "");
  return stallscope_name_intern(name);
}

// Once per descriptor: the peer's name goes into its slot. Its system
// calls keep errno (nothing else on a socket read's path sets it).
void name_slot(int fd, FdInfo& info) {
  const int saved = errno;
  info.path = peer_name(fd);
  errno = saved;
  if (info.path == 0) return;
  const uint64_t pos = fd_table().position(fd);
  if (fd_table().write(fd, info, info.gen)) {
    fd_table().set_position(fd, pos);
    ++info.gen;
  }
}

}  // namespace

bool is_network_socket(int domain, int type) noexcept {
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  return (domain == AF_INET || domain == AF_INET6) && (base == SOCK_STREAM || base == SOCK_DGRAM);
}

FdInfo network_socket_info(int type) noexcept {
  FdInfo info;
  // STALLSCOPE_PRELOAD_SOCKETS=off: foreign, as any socket (no check per read).
  info.kind = config().socket_reads ? FdKind::kSocket : FdKind::kForeign;
  info.tier = static_cast<uint8_t>(format::Tier::kNetwork);
  if (type & SOCK_NONBLOCK) info.flags |= kNonBlocking;
  return info;
}

FdInfo classify_socket(int fd, uint8_t flags) noexcept {
  FdInfo info;
  info.kind = FdKind::kForeign;
  info.flags = flags;
  int domain = 0, type = 0;
  if (sys_sockopt(fd, SO_DOMAIN, &domain) != 0 || sys_sockopt(fd, SO_TYPE, &type) != 0) return info;
  if (!is_network_socket(domain, type)) return info;
  info = network_socket_info(type);
  info.flags |= flags;
  return info;
}

void socket_reads_init() noexcept {
  const double ns_per = ns_per_tick();
  if (!(ns_per > 0)) return;
  g_min_ticks = static_cast<uint64_t>(config().socket_min_ns / ns_per);
  g_gap_ticks = static_cast<uint64_t>(kPollGapNs / ns_per);
}

void record_socket_read(int fd, FdInfo& info, uint64_t t0, uint64_t bytes) noexcept {
  const uint64_t t1 = ticks_now();
  if (t_poll.fd == fd) {
    if (t_poll.t1 <= t0 && t0 - t_poll.t1 <= g_gap_ticks) t0 = t_poll.t0;
    t_poll.fd = -1;
  }
  if (__builtin_expect(info.path == 0, 0)) name_slot(fd, info);
  // One reader per socket as a rule: a plain store, not a locked add.
  const uint64_t offset = fd_table().position(fd);
  fd_table().set_position(fd, offset + bytes);
  Pending& p = t_pending;
  if (t1 - t0 >= g_min_ticks) {
    if (p.fd >= 0) flush();
    emit(info.path, t0, t1, bytes, offset);
    return;
  }
  if (p.fd != fd || p.file != info.path) {
    if (p.fd >= 0) flush();
    p.fd = fd;
    p.file = info.path;
    p.offset = offset;
  }
  p.bytes += bytes;
  p.ticks += t1 - t0;
  p.end = t1;
  if (p.ticks >= g_min_ticks) flush();
}

void socket_poll_ended(int fd, uint64_t t0) noexcept {
  t_poll = PollSeen{fd, t0, ticks_now()};
}

void socket_reads_closing(int fd) noexcept {
  if (__builtin_expect(fd < 0 || (t_pending.fd != fd && t_poll.fd != fd), 1)) return;
  if (t_poll.fd == fd) t_poll.fd = -1;
  if (t_pending.fd != fd) return;
  // Inside another wrapper the sum waits for the thread's next socket read
  // (it keeps the peer's name, so a reused number does not mix them up).
  Guard guard;
  if (!guard.entered()) return;
  const int saved = errno;
  flush();
  errno = saved;
}

void socket_reads_after_fork() noexcept {
  t_pending = Pending{};
  t_poll = PollSeen{};
}

}  // namespace stallscope::preload
