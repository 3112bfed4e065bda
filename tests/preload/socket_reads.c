/* Reads from sockets and pipes, for test_preload_sockets.cpp. Every mode
 * checks the bytes it got (the shim must not change them) and prints
 * KEY VALUE lines:
 *   socket_reads tcp BYTES     a server thread sends BYTES over 127.0.0.1;
 *                              the client reads them with recv, read, readv,
 *                              recvfrom and recvmsg in turn (PEER, GOT)
 *   socket_reads udp COUNT     COUNT datagrams of 1000 bytes to itself (PEER, GOT)
 *   socket_reads local BYTES   the same over a unix socketpair, a unix
 *                              socket made by socket() and a pipe (GOT)
 *   socket_reads eagain N K    N receives of a non-blocking socket that get
 *                              EAGAIN, then K bytes (PEER, EAGAIN, READS, GOT)
 *   socket_reads latency       two 1000-byte messages 100 ms apart: a
 *                              blocking recv, then poll + recv (PEER; WAIT1_US,
 *                              WAIT2_US: how long each took as the program saw
 *                              it; GAP_US: from the poll's return to the recv's end)
 *   socket_reads tiny BYTES    BYTES read one byte per recv (PEER, GOT, CALLS)
 *   socket_reads bench N       least ns per call (batches of 16, N calls):
 *                              a 4 KiB pread of a cached file, a 4 KiB recv
 *                              of a queued datagram, an EAGAIN recv
 *                              (FILE_NS, SOCK_NS, EAGAIN_NS); run it with and
 *                              without the shim to see its cost */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static unsigned char pattern(uint64_t i) { return (unsigned char)(i * 7 % 251); }

static void die(const char* what) {
  fprintf(stderr, "socket_reads: %s: %s\n", what, strerror(errno));
  exit(1);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Sends `bytes` of the pattern on fd, in pieces, then closes it. */
static void send_all(int fd, uint64_t bytes) {
  unsigned char buf[65536];
  uint64_t sent = 0;
  while (sent < bytes) {
    size_t n = bytes - sent < sizeof buf ? (size_t)(bytes - sent) : sizeof buf;
    for (size_t i = 0; i < n; ++i) buf[i] = pattern(sent + i);
    ssize_t k = write(fd, buf, n);
    if (k < 0) die("write");
    sent += (uint64_t)k;
  }
}

/* Checks and counts what `n` bytes at stream position `*got` hold. */
static void take(const unsigned char* buf, ssize_t n, uint64_t* got) {
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] != pattern(*got + (uint64_t)i)) {
      fprintf(stderr, "socket_reads: byte %llu differs\n", (unsigned long long)(*got + i));
      exit(1);
    }
  }
  *got += (uint64_t)n;
}

/* One receive by the `k`-th entry point in turn. */
static ssize_t receive(int fd, unsigned char* buf, size_t n, int k) {
  struct iovec iov[2] = {{buf, n / 2}, {buf + n / 2, n - n / 2}};
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  switch (k % 5) {
    case 0: return recv(fd, buf, n, 0);
    case 1: return read(fd, buf, n);
    case 2: return readv(fd, iov, 2);
    case 3: return recvfrom(fd, buf, n, 0, NULL, NULL);
    default: return recvmsg(fd, &m, 0);
  }
}

/* Reads fd to its end with every entry point; returns the bytes. */
static uint64_t drain(int fd, int only_read) {
  unsigned char buf[32768];
  uint64_t got = 0;
  for (int k = 0;; ++k) {
    ssize_t n = only_read ? read(fd, buf, sizeof buf) : receive(fd, buf, sizeof buf, k);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("receive");
    if (n == 0) return got;
    take(buf, n, &got);
  }
}

/* A TCP server on 127.0.0.1 whose one connection runs `serve`. */
struct Server {
  int listen_fd, port;
  uint64_t bytes;
  int go[2]; /* eagain: the client says when to send */
  void (*serve)(struct Server*, int fd);
  pthread_t thread;
};

static void* server_main(void* arg) {
  struct Server* s = arg;
  int fd = accept(s->listen_fd, NULL, NULL);
  if (fd < 0) die("accept");
  s->serve(s, fd);
  close(fd);
  return NULL;
}

static int start_server(struct Server* s) {
  s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  if (s->listen_fd < 0) die("socket");
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (bind(s->listen_fd, (struct sockaddr*)&a, sizeof a) != 0) die("bind");
  if (listen(s->listen_fd, 1) != 0) die("listen");
  if (getsockname(s->listen_fd, (struct sockaddr*)&a, &alen) != 0) die("getsockname");
  s->port = ntohs(a.sin_port);
  if (pthread_create(&s->thread, NULL, server_main, s) != 0) die("pthread_create");
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0) die("socket");
  if (connect(c, (struct sockaddr*)&a, sizeof a) != 0) die("connect");
  printf("PEER tcp:127.0.0.1:%d\n", s->port);
  return c;
}

static void stop_server(struct Server* s, int client) {
  close(client);
  pthread_join(s->thread, NULL);
  close(s->listen_fd);
}

static void serve_bytes(struct Server* s, int fd) { send_all(fd, s->bytes); }

static int mode_tcp(uint64_t bytes) {
  struct Server s = {.bytes = bytes, .serve = serve_bytes};
  int c = start_server(&s);
  printf("GOT %llu\n", (unsigned long long)drain(c, 0));
  stop_server(&s, c);
  return 0;
}

static int mode_udp(int count) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0) die("bind");
  if (getsockname(fd, (struct sockaddr*)&a, &alen) != 0) die("getsockname");
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) die("connect");
  printf("PEER udp:127.0.0.1:%d\n", ntohs(a.sin_port));
  unsigned char buf[1000];
  uint64_t got = 0, sent = 0;
  for (int i = 0; i < count; ++i) {
    for (size_t j = 0; j < sizeof buf; ++j) buf[j] = pattern(sent + j);
    if (send(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) die("send");
    sent += sizeof buf;
    ssize_t n = i % 2 ? recv(fd, buf, sizeof buf, 0) : recvfrom(fd, buf, sizeof buf, 0, NULL, NULL);
    if (n != (ssize_t)sizeof buf) die("recv");
    take(buf, n, &got);
  }
  printf("GOT %llu\n", (unsigned long long)got);
  close(fd);
  return 0;
}

struct Feed {
  int fd;
  uint64_t bytes;
};
static void* feed_main(void* arg) {
  struct Feed* f = arg;
  send_all(f->fd, f->bytes);
  close(f->fd);
  return NULL;
}

/* Feeds fds[1] from a thread and drains fds[0]. */
static uint64_t over(int fds[2], uint64_t bytes, int only_read) {
  struct Feed f = {fds[1], bytes};
  pthread_t t;
  if (pthread_create(&t, NULL, feed_main, &f) != 0) die("pthread_create");
  uint64_t got = drain(fds[0], only_read);
  pthread_join(t, NULL);
  close(fds[0]);
  return got;
}

static int mode_local(uint64_t bytes) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) die("socketpair");
  printf("GOT %llu\n", (unsigned long long)over(fds, bytes, 0));
  /* A unix socket made by socket(), bound to an abstract name. */
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0) die("socket");
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "stallscope-test-%d", (int)getpid());
  socklen_t alen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1);
  if (bind(l, (struct sockaddr*)&a, alen) != 0 || listen(l, 1) != 0) die("bind");
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  if (c < 0 || connect(c, (struct sockaddr*)&a, alen) != 0) die("connect");
  int s = accept(l, NULL, NULL);
  if (s < 0) die("accept");
  int pair[2] = {c, s};
  printf("GOT %llu\n", (unsigned long long)over(pair, bytes, 0));
  close(l);
  if (pipe(fds) != 0) die("pipe");
  printf("GOT %llu\n", (unsigned long long)over(fds, bytes, 1));
  return 0;
}

/* eagain: sends s->bytes once the client writes to `go`. */
static void serve_on_go(struct Server* s, int fd) {
  char c;
  if (read(s->go[0], &c, 1) != 1) die("read go");
  send_all(fd, s->bytes);
}

static int mode_eagain(long polls, uint64_t bytes) {
  struct Server s = {.bytes = bytes, .serve = serve_on_go};
  if (pipe(s.go) != 0) die("pipe");
  int c = start_server(&s);
  if (fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK) != 0) die("fcntl");
  unsigned char buf[4096];
  long eagain = 0;
  const double t0 = now_ns();
  for (long i = 0; i < polls; ++i) {
    errno = 0;
    ssize_t n = i % 3 == 0 ? recv(c, buf, sizeof buf, MSG_DONTWAIT)
                : i % 3 == 1 ? recv(c, buf, sizeof buf, 0) : read(c, buf, sizeof buf);
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) ++eagain;
  }
  const double t1 = now_ns();
  printf("EAGAIN %ld\nEAGAIN_NS %.1f\n", eagain, (t1 - t0) / (double)polls);
  if (write(s.go[1], "g", 1) != 1) die("write go");
  uint64_t got = 0;
  long reads = 0;
  while (got < bytes) {
    ssize_t n = recv(c, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = {c, POLLIN, 0};
      poll(&p, 1, 5000);
      continue;
    }
    if (n <= 0) die("recv");
    ++reads;
    take(buf, n, &got);
  }
  printf("READS %ld\nGOT %llu\n", reads, (unsigned long long)got);
  stop_server(&s, c);
  return 0;
}

static void serve_late(struct Server* s, int fd) {
  (void)s;
  unsigned char buf[1000];
  for (size_t i = 0; i < sizeof buf; ++i) buf[i] = pattern(i);
  for (int k = 0; k < 2; ++k) {
    sleep_ms(100);
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) die("write");
  }
}

/* Reads one whole 1000-byte message; prints how long its first receive
 * (and the poll before it) took, and the gap between them. */
static void message(int fd, int poll_first, const char* key) {
  unsigned char buf[1000];
  size_t got = 0;
  for (int first = 1; got < sizeof buf; first = 0) {
    const double t0 = now_ns();
    double t1 = t0;
    if (poll_first) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 5000) != 1) die("poll");
      t1 = now_ns();
    }
    ssize_t n = recv(fd, buf + got, sizeof buf - got, 0);
    const double t2 = now_ns();
    if (n <= 0) die("recv");
    got += (size_t)n;
    if (first) {
      printf("%s %.0f\n", key, (t2 - t0) / 1e3);
      if (poll_first) printf("GAP_US %.0f\n", (t2 - t1) / 1e3);
    }
  }
}

static int mode_latency(void) {
  struct Server s = {.serve = serve_late};
  int c = start_server(&s);
  message(c, 0, "WAIT1_US");
  if (fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK) != 0) die("fcntl");
  message(c, 1, "WAIT2_US");
  stop_server(&s, c);
  return 0;
}

static int mode_tiny(uint64_t bytes) {
  struct Server s = {.bytes = bytes, .serve = serve_bytes};
  int c = start_server(&s);
  uint64_t got = 0;
  long calls = 0;
  unsigned char b;
  for (;;) {
    ssize_t n = recv(c, &b, 1, 0);
    ++calls;
    if (n < 0) die("recv");
    if (n == 0) break;
    take(&b, 1, &got);
  }
  printf("GOT %llu\nCALLS %ld\n", (unsigned long long)got, calls);
  stop_server(&s, c);
  return 0;
}

/* The least time per call over batches of 16: what a call costs when
 * nothing else runs (the mean moves with the machine's load). */
struct Best {
  double ns;
};
static void batch(struct Best* b, double t0) {
  const double per = (now_ns() - t0) / 16.0;
  if (b->ns == 0 || per < b->ns) b->ns = per;
}

static int mode_bench(long n) {
  char path[] = "/tmp/socket_reads-XXXXXX";
  int f = mkstemp(path);
  if (f < 0) die("mkstemp");
  unlink(path);
  static unsigned char buf[1 << 20];
  if (write(f, buf, sizeof buf) != (ssize_t)sizeof buf) die("write");
  struct Best file = {0}, sock = {0}, again = {0};
  for (long i = 0; i < n; i += 16) {
    const double t0 = now_ns();
    for (int k = 0; k < 16; ++k) {
      if (pread(f, buf, 4096, (off_t)(((i + k) % 256) * 4096)) != 4096) die("pread");
    }
    batch(&file, t0);
  }
  close(f);

  int u = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (u < 0 || bind(u, (struct sockaddr*)&a, sizeof a) != 0) die("bind");
  if (getsockname(u, (struct sockaddr*)&a, &alen) != 0) die("getsockname");
  if (connect(u, (struct sockaddr*)&a, sizeof a) != 0) die("connect");
  for (long i = 0; i < n; i += 16) {
    for (int k = 0; k < 16; ++k) {
      if (send(u, buf, 4096, 0) != 4096) die("send");
    }
    const double t0 = now_ns();
    for (int k = 0; k < 16; ++k) {
      if (recv(u, buf, 4096, 0) != 4096) die("recv");
    }
    batch(&sock, t0);
  }
  for (long i = 0; i < n; i += 16) {
    const double t0 = now_ns();
    for (int k = 0; k < 16; ++k) {
      if (recv(u, buf, 4096, MSG_DONTWAIT) != -1 || errno != EAGAIN) die("recv EAGAIN");
    }
    batch(&again, t0);
  }
  printf("FILE_NS %.1f\nSOCK_NS %.1f\nEAGAIN_NS %.1f\n", file.ns, sock.ns, again.ns);
  close(u);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "";
  const uint64_t arg = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
  if (strcmp(mode, "tcp") == 0) return mode_tcp(arg);
  if (strcmp(mode, "udp") == 0) return mode_udp((int)arg);
  if (strcmp(mode, "local") == 0) return mode_local(arg);
  if (strcmp(mode, "eagain") == 0 && argc > 3) return mode_eagain((long)arg, strtoull(argv[3], NULL, 10));
  if (strcmp(mode, "latency") == 0) return mode_latency();
  if (strcmp(mode, "tiny") == 0) return mode_tiny(arg);
  if (strcmp(mode, "bench") == 0) return mode_bench((long)arg);
  fprintf(stderr, "usage: socket_reads tcp|udp|local|eagain|latency|tiny|bench ...\n");
  return 2;
}
