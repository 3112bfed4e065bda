/* Process and descriptor life cycles under the shim, in a program that
 * knows nothing of stallscope. Each mode prints what it did.
 *   lifecycle reuse A B        fd numbers reused after close (three ways)
 *   lifecycle spawn FILE       vfork+exec and posix_spawn while 8 threads read
 *   lifecycle exec FILE PROG…  read 100 bytes, then exec PROG…
 *   lifecycle read FILE N      read N bytes (an exec target)
 *   lifecycle closeall FILE    close every descriptor, then read again
 *   lifecycle exit FILE        read, then _exit(0)
 *   lifecycle killworker FILE  a forked worker reads until SIGKILLed
 *   lifecycle threads FILE N   N threads make their first call at once
 *   lifecycle execpipe         read a pipe fed by an exec'd program
 *   lifecycle execchain FILE N [plant]
 *                              read N+1 bytes, then exec itself with N-1
 *                              (N+1 images in all); `plant` first puts a
 *                              file named as another host's trace of this
 *                              pid into $STALLSCOPE_OUT
 *   lifecycle signals FILE     what sigaction/signal read back and do for
 *                              SIGINT/SIGTERM, then read and die of SIGTERM
 *   lifecycle nofile FILE      open FILE (reading 8 bytes of each) until open
 *                              fails; print the count, the errno and every
 *                              other descriptor with what it names */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;
static char buf[1 << 16];

static void die(const char* what) { perror(what); exit(3); }

static void read_n(const char* path, size_t n) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) die(path);
  if (pread(fd, buf, n, 0) != (ssize_t)n) die("pread");
  close(fd);
}

static int reuse(const char* a, const char* b) {
  /* 1: open A, close, open B: same number, B's path. */
  int fa = open(a, O_RDONLY);
  if (pread(fa, buf, 101, 0) != 101) die("pread a");
  close(fa);
  int fb = open(b, O_RDONLY);
  if (pread(fb, buf, 201, 0) != 201) die("pread b");
  printf("SAME1 %d\n", fa == fb);
  close(fb);
  /* 2: the number held by a socket in between. */
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  printf("SAME2 %d\n", s == fb);
  close(s);
  /* 3: reopened through a raw system call the shim does not see, after
   * A was read through the number: classified afresh at first use. (A
   * raw close is not seen either: then the old path would stay.) */
  fa = open(a, O_RDONLY);
  if (pread(fa, buf, 102, 0) != 102) die("pread a2");
  close(fa);
  fb = (int)syscall(SYS_openat, AT_FDCWD, b, O_RDONLY);
  if (pread(fb, buf, 202, 0) != 202) die("pread b2");
  printf("SAME3 %d\n", fa == fb);
  /* 4: dup2 over a file descriptor of A. */
  fa = open(a, O_RDONLY);
  if (dup2(fb, fa) != fa) die("dup2");
  if (pread(fa, buf, 203, 0) != 203) die("pread dup2");
  close(fa);
  close(fb);
  return 0;
}

static atomic_int g_stop;
static atomic_long g_reads;
static const char* g_file;

static void* reader_loop(void* arg) {
  (void)arg;
  const int fd = open(g_file, O_RDONLY);
  const struct timespec pause = {0, 200000};
  char mine[64];
  while (!atomic_load(&g_stop)) {
    if (pread(fd, mine, 64, 0) == 64) atomic_fetch_add(&g_reads, 1);
    nanosleep(&pause, NULL);
  }
  close(fd);
  return NULL;
}

static int spawn(const char* file) {
  g_file = file;
  pthread_t th[8];
  for (int i = 0; i < 8; ++i) pthread_create(&th[i], NULL, reader_loop, NULL);
  char* argv[] = {"/bin/true", NULL};
  for (int i = 0; i < 20; ++i) {
    pid_t pid = vfork();
    if (pid == 0) { execve("/bin/true", argv, environ); _exit(127); }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) die("vfork child");
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0) die("posix_spawn");
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) die("spawn child");
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 8; ++i) pthread_join(th[i], NULL);
  printf("READS %ld\n", atomic_load(&g_reads));
  return 0;
}

static pthread_barrier_t g_barrier;
static void* first_call(void* arg) {
  pthread_barrier_wait(&g_barrier);
  const int fd = (int)(intptr_t)arg;
  char mine[128];  /* each thread its own buffer: no race of the test's own */
  return pread(fd, mine, 77, 0) == 77 ? NULL : (void*)1;
}

static int threads(const char* file, int n) {
  const int fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_RDONLY); /* classified lazily, by all at once */
  pthread_t th[256];
  pthread_barrier_init(&g_barrier, NULL, (unsigned)n);
  for (int i = 0; i < n; ++i) pthread_create(&th[i], NULL, first_call, (void*)(intptr_t)fd);
  int bad = 0;
  for (int i = 0; i < n; ++i) { void* r; pthread_join(th[i], &r); bad += r != NULL; }
  printf("THREADS %d BAD %d\n", n, bad);
  return bad != 0;
}

/* The worker counts its reads in shared memory; it is killed once it has
 * made 100 and 200 ms more have passed (four flushes at 50 ms), however
 * slowly a loaded machine runs it. */
static int killworker(const char* file) {
  atomic_long* reads = mmap(NULL, sizeof *reads, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (reads == MAP_FAILED) die("mmap");
  pid_t pid = fork();
  if (pid == 0) {
    for (;;) { read_n(file, 99); atomic_fetch_add(reads, 1); usleep(1000); }
  }
  for (int i = 0; i < 30000 && atomic_load(reads) < 100; ++i) usleep(1000); /* 30 s at most */
  usleep(200 * 1000);
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  read_n(file, 98);
  printf("KILLED %d\n", WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  return 0;
}

static int execpipe(void) {
  int p[2];
  if (pipe(p) != 0) die("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    execl("/bin/sh", "sh", "-c", "sleep 0.1; echo hello", (char*)NULL);
    _exit(127);
  }
  close(p[1]);
  ssize_t n = read(p[0], buf, sizeof buf); /* blocks ~100 ms */
  close(p[0]);
  waitpid(pid, NULL, 0);
  printf("PIPE %zd\n", n);
  return 0;
}

static int execchain(char** argv, int n, int plant) {
  if (plant) {
    char path[4096];
    snprintf(path, sizeof path, "%s/otherhost-r0-%d.sst", getenv("STALLSCOPE_OUT"), (int)getpid());
    FILE* f = fopen(path, "w");
    if (f == NULL) die(path);
    fputs("another host's trace\n", f);
    fclose(f);
  }
  read_n(argv[2], (size_t)n + 1);
  if (n == 0) return 0;
  char next[16];
  snprintf(next, sizeof next, "%d", n - 1);
  char* args[] = {argv[0], argv[1], argv[2], next, NULL};
  execv("/proc/self/exe", args);
  die("execv");
  return 3;
}

static volatile sig_atomic_t term_seen;
static void on_term(int sig) { (void)sig; ++term_seen; }

/* 1 when SIGINT is really ignored (the kernel's view, as exec keeps it). */
static int int_ignored_in_kernel(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long mask = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "SigIgn: %llx", &mask) == 1) break;
  if (f != NULL) fclose(f);
  return (int)((mask >> (SIGINT - 1)) & 1);
}

static int signals(const char* file) {
  struct sigaction q;
  sigaction(SIGINT, NULL, &q);
  printf("INT_DFL %d\n", q.sa_handler == SIG_DFL && !(q.sa_flags & SA_SIGINFO));
  printf("TERM_OLD_DFL %d\n", signal(SIGTERM, on_term) == SIG_DFL);
  raise(SIGTERM);
  printf("TERM_HANDLED %d\n", (int)term_seen);
  sigaction(SIGTERM, NULL, &q);
  printf("TERM_READBACK %d\n", q.sa_handler == on_term);
  signal(SIGINT, SIG_IGN);
  printf("INT_IGN_REAL %d\n", int_ignored_in_kernel());
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGTERM, &dfl, NULL);
  read_n(file, 123);
  fflush(stdout);
  raise(SIGTERM); /* the default action: the file is completed first */
  return 4;
}

static int nofile(const char* file) {
  enum { kMax = 4096 };
  static int mine[kMax];
  int n = 0, err = 0;
  while (n < kMax) {
    const int fd = open(file, O_RDONLY);
    if (fd < 0) {
      err = errno;
      break;
    }
    mine[n++] = fd;
    if (pread(fd, buf, 8, 0) != 8) die("pread");
  }
  printf("OPENED %d\nERRNO %d\n", n, err);
  for (int fd = 0; fd < kMax; ++fd) {
    int own = 0;
    for (int i = 0; i < n && !own; ++i) own = mine[i] == fd;
    if (own || fcntl(fd, F_GETFD) < 0) continue;
    char link[64], target[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t k = readlink(link, target, sizeof target - 1);
    target[k > 0 ? k : 0] = '\0';
    printf("FD %d %s\n", fd, target);
  }
  for (int i = 0; i < n; ++i) close(mine[i]);
  read_n(file, 114);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (strcmp(mode, "reuse") == 0 && argc == 4) return reuse(argv[2], argv[3]);
  if (strcmp(mode, "spawn") == 0 && argc == 3) return spawn(argv[2]);
  if (strcmp(mode, "read") == 0 && argc == 4) { read_n(argv[2], (size_t)atoi(argv[3])); return 0; }
  if (strcmp(mode, "exec") == 0 && argc >= 4) {
    read_n(argv[2], 100);
    execv(argv[3], argv + 3);
    die("execv");
  }
  if (strcmp(mode, "closeall") == 0 && argc == 3) {
    read_n(argv[2], 111);
    close_range(3, ~0U, 0);
    read_n(argv[2], 112);
    printf("CLOSED\n");
    return 0;
  }
  if (strcmp(mode, "exit") == 0 && argc == 3) { read_n(argv[2], 113); _exit(0); }
  if (strcmp(mode, "killworker") == 0 && argc == 3) return killworker(argv[2]);
  if (strcmp(mode, "threads") == 0 && argc == 4) return threads(argv[2], atoi(argv[3]));
  if (strcmp(mode, "execpipe") == 0) return execpipe();
  if (strcmp(mode, "signals") == 0 && argc == 3) return signals(argv[2]);
  if (strcmp(mode, "nofile") == 0 && argc == 3) return nofile(argv[2]);
  if (strcmp(mode, "execchain") == 0 && argc >= 4)
    return execchain(argv, atoi(argv[3]), argc == 5 && strcmp(argv[4], "plant") == 0);
  return 2;
}
