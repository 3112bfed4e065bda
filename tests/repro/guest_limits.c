// A program that meets its own limits, for test_repro_guest_limits
// (RELIABILITY.md 39, 40, 9/issue 46). Run under the shim or without it:
//
//   guest_limits idle MS         stays idle MS ms, then prints "heaps N"
//                                (malloc_info's arenas) and "vmsize KB"
//   guest_limits oom FILE [K]    starts a thread, allocates until malloc
//                                fails, frees K KiB, then the thread reads
//                                FILE 100 times (its first reads);
//                                prints "reads 100 ok"
//   guest_limits fork FILE       reads FILE, then forks a child that exits 0;
//                                prints "fork ok" or "fork failed ERRNO"
//   guest_limits clone FILE N    a raw clone thread sharing the main thread's
//                                TLS (no CLONE_SETTLS) reads FILE N times,
//                                then the main thread reads it N times;
//                                prints "reads main N clone N"
//   guest_limits fiber FILE N    a new thread reads FILE N times on a fiber's
//                                stack (makecontext), its first traced calls,
//                                then N times on its own stack; prints
//                                "reads fiber N thread N"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static char out_buf[4096];  // stdout's buffer: printing needs no malloc

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int read_file(const char* path) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n < 0 ? -1 : 0;
}

static int heaps(void) {
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == NULL) return -1;
  malloc_info(0, f);
  fclose(f);
  int n = 0;
  for (const char* p = text; (p = strstr(p, "<heap nr=")) != NULL; ++p) ++n;
  free(text);
  return n;
}

static long vmsize_kb(void) {
  char text[4096];
  const int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char* at = strstr(text, "VmSize:");
  return at != NULL ? strtol(at + 7, NULL, 10) : -1;
}

static int idle(long ms) {
  sleep_ms(ms);
  const int h = heaps();
  printf("heaps %d\nvmsize %ld\n", h, vmsize_kb());
  return 0;
}

// --- oom ---------------------------------------------------------------

static const char* g_file;
static int g_reads_ok;
static int g_free_blocks = 2;  // of 1 KiB
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_go;

// Started before memory runs out; its first read comes after.
static void* reader(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  while (!g_go) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  for (int i = 0; i < 100; ++i)
    if (read_file(g_file) == 0) ++g_reads_ok;
  return NULL;
}

static int oom(const char* file) {
  g_file = file;
  pthread_t t;
  const int err = pthread_create(&t, NULL, reader, NULL);
  if (err != 0) {
    printf("pthread_create failed %d\n", err);
    return 3;
  }
  // Exhaust memory: big blocks, then smaller and smaller ones, a list per
  // size, each kept.
  size_t n_big = 0;
  for (void** big = NULL;;) {
    void** p = malloc(1 << 20);
    if (p == NULL) break;
    *p = big;
    big = p;
    ++n_big;
  }
  void** small[4] = {NULL, NULL, NULL, NULL};
  size_t n_small = 0;
  for (int k = 0; k < 4; ++k) {
    for (;;) {
      void** p = malloc((size_t)4096 >> (2 * k));
      if (p == NULL) break;
      *p = small[k];
      small[k] = p;
      ++n_small;
    }
  }
  // Free a little (K blocks of 1 KiB), then the thread reads.
  for (int i = 0; i < g_free_blocks && small[1] != NULL; ++i) {
    void** next = *small[1];
    free(small[1]);
    small[1] = next;
  }
  pthread_mutex_lock(&g_mu);
  g_go = 1;
  pthread_cond_signal(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(t, NULL);
  printf("exhausted %zu MiB %zu small\nreads %d ok\n", n_big, n_small, g_reads_ok);
  return g_reads_ok == 100 ? 0 : 4;
}

// --- fork --------------------------------------------------------------

static int fork_child(const char* file) {
  if (read_file(file) != 0) return 2;
  sleep_ms(50);  // the recorder's threads, if any, have started
  const pid_t pid = fork();
  if (pid < 0) {
    printf("fork failed %d\n", errno);
    return 0;
  }
  if (pid == 0) _exit(read_file(file) == 0 ? 0 : 1);
  int st = 0;
  waitpid(pid, &st, 0);
  printf("fork %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "child failed");
  return 0;
}

// --- clone -------------------------------------------------------------

static volatile int g_clone_done;
static int g_clone_reads;
static int g_n;

static int clone_body(void* arg) {
  (void)arg;
  // Raw system calls only for the thread's own bookkeeping: it shares the
  // main thread's TLS, errno included.
  for (int i = 0; i < g_n; ++i)
    if (read_file(g_file) == 0) ++g_clone_reads;
  __atomic_store_n(&g_clone_done, 1, __ATOMIC_RELEASE);
  syscall(SYS_exit, 0);
  return 0;
}

static int clone_reads(const char* file, int n) {
  g_file = file;
  g_n = n;
  if (read_file(file) != 0) return 2;  // the main thread registered first
  const size_t stack_bytes = 1 << 20;
  char* stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  if (stack == MAP_FAILED) return 2;
  // A thread of the same process without CLONE_SETTLS: %fs stays the main
  // thread's, so every thread-local it touches is the main thread's.
  const int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                    CLONE_SYSVSEM;
  if (clone(clone_body, stack + stack_bytes, flags, NULL) < 0) {
    printf("clone failed %d\n", errno);
    return 3;
  }
  // One after the other: the shim's own per-thread state (its re-entry
  // guard) is shared too, and a read of one while the other is inside a
  // wrapper would pass untraced.
  while (!__atomic_load_n(&g_clone_done, __ATOMIC_ACQUIRE)) sleep_ms(1);
  sleep_ms(20);  // the clone thread's exit
  int main_reads = 0;
  for (int i = 0; i < n; ++i)
    if (read_file(file) == 0) ++main_reads;
  printf("reads main %d clone %d\n", main_reads, g_clone_reads);
  return 0;
}

// --- fiber -------------------------------------------------------------

// oneTBB's resumable tasks, greenlets and coroutine libraries run code on
// stacks of their own: the thread is still its own pthread.
static ucontext_t g_thread_ctx, g_fiber_ctx;
static int g_fiber_reads, g_thread_reads;

static void fiber_body(void) {
  for (int i = 0; i < g_n; ++i)
    if (read_file(g_file) == 0) ++g_fiber_reads;
}

static void* fiber_thread(void* arg) {
  (void)arg;
  const size_t stack_bytes = 1 << 20;
  char* stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  if (stack == MAP_FAILED || getcontext(&g_fiber_ctx) != 0) return NULL;
  g_fiber_ctx.uc_stack.ss_sp = stack;
  g_fiber_ctx.uc_stack.ss_size = stack_bytes;
  g_fiber_ctx.uc_link = &g_thread_ctx;
  makecontext(&g_fiber_ctx, fiber_body, 0);
  if (swapcontext(&g_thread_ctx, &g_fiber_ctx) != 0) return NULL;
  for (int i = 0; i < g_n; ++i)
    if (read_file(g_file) == 0) ++g_thread_reads;
  return NULL;
}

static int fiber_reads(const char* file, int n) {
  g_file = file;
  g_n = n;
  pthread_t t;
  if (pthread_create(&t, NULL, fiber_thread, NULL) != 0 || pthread_join(t, NULL) != 0) return 3;
  printf("reads fiber %d thread %d\n", g_fiber_reads, g_thread_reads);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
  if (argc >= 3 && strcmp(argv[1], "idle") == 0) return idle(atol(argv[2]));
  if (argc >= 3 && strcmp(argv[1], "oom") == 0) {
    if (argc >= 4) g_free_blocks = atoi(argv[3]);
    return oom(argv[2]);
  }
  if (argc >= 3 && strcmp(argv[1], "fork") == 0) return fork_child(argv[2]);
  if (argc >= 4 && strcmp(argv[1], "clone") == 0) return clone_reads(argv[2], atoi(argv[3]));
  if (argc >= 4 && strcmp(argv[1], "fiber") == 0) return fiber_reads(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: guest_limits idle MS | oom FILE | fork FILE | clone FILE N | fiber FILE N\n");
  return 2;
}
