/* A native training pipeline that knows nothing of stallscope, for the
 * attribution-accuracy benchmark: loader threads read each sample's file
 * (read, pread or mmap; opened per sample), wait on a simulated RPC (sleep)
 * and "decode" it (CPU spin), then hand the batch to the trainer over a pipe
 * or a condition-variable ring; the trainer blocks for a batch, "trains" (CPU
 * spin) and prints each step's wall time and its wait, the ground truth a
 * harness compares the tracer's attribution against.
 *   accuracy_native_pipeline --data DIR [--files N] [--steps S] [--batch B]
 *     [--loaders L] [--queue Q] [--handoff pipe|condvar]
 *     [--read read|pread|mmap] [--decode-us U] [--rpc-us U] [--compute-us U]
 * Prints "step I: WALL ms wait WAIT ms" per step, then "done S steps".
 * Exit: 0 done, 1 a system call failed, 2 bad arguments, 3 a sample file
 * could not be opened or read. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { kChunk = 64 * 1024, kPage = 4096, kMaxLoaders = 16, kMaxQueue = 64 };
enum Handoff { kPipe, kCondvar };
enum ReadMode { kRead, kPread, kMmap };

struct Config {
  const char* data;
  long files, steps, batch, loaders, queue, decode_us, rpc_us, compute_us;
  enum Handoff handoff;
  enum ReadMode read_mode;
};

/* Set once by parse_args before any thread starts, read-only after. */
static struct Config g_cfg = {NULL, 16, 40, 4, 1, 2, 0, 0, 0, kPipe, kRead};
static atomic_long g_next_batch;

/* pipe handoff: batch ids through the pipe, at most Q of them in it. */
static int g_pipe[2] = {-1, -1};
static sem_t g_slots;

/* condvar handoff: a bounded ring of batch ids. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_not_full = PTHREAD_COND_INITIALIZER;
static int32_t g_ring[kMaxQueue];
static int g_head, g_count;

static _Noreturn void die(const char* what, int err) {
  fprintf(stderr, "native_pipeline: %s: %s\n", what, strerror(err));
  exit(1);
}
static _Noreturn void die_file(const char* path, int err) {
  fprintf(stderr, "native_pipeline: %s: %s\n", path, strerror(err));
  exit(3);
}
/* pthread calls return the error instead of setting errno. */
static void check_pt(int rc, const char* what) {
  if (rc != 0) die(what, rc);
}

static int64_t now_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) die("clock_gettime", errno);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static void spin_us(long us) {
  if (us <= 0) return;
  const int64_t end = now_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)us * 1000;
  volatile uint64_t x = 1;
  while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end)
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1;
}
static void sleep_us(long us) {
  if (us <= 0) return;
  struct timespec left = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&left, &left) != 0)
    if (errno != EINTR) die("nanosleep", errno);
}

/* ---- reading one sample ---- */

static void read_chunks(int fd, const char* path, char* buf, int positional) {
  off_t off = 0;
  for (;;) {
    const ssize_t n = positional ? pread(fd, buf, kChunk, off) : read(fd, buf, kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die_file(path, errno);
    if (n == 0) return;
    off += n;
  }
}

static void touch_pages(int fd, const char* path) {
  struct stat st;
  if (fstat(fd, &st) != 0) die_file(path, errno);
  if (st.st_size == 0) return; /* mmap of length 0 is EINVAL */
  const size_t len = (size_t)st.st_size;
  void* map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) die_file(path, errno);
  const volatile unsigned char* bytes = map; /* volatile: each touch is a real load */
  unsigned sum = 0;
  for (size_t off = 0; off < len; off += kPage) sum += bytes[off];
  (void)sum;
  if (munmap(map, len) != 0) die_file(path, errno);
}

static void load_sample(long sample, char* buf) {
  char path[4096];
  const int len = snprintf(path, sizeof path, "%s/f%ld", g_cfg.data, sample % g_cfg.files);
  if (len < 0 || (size_t)len >= sizeof path) die_file(g_cfg.data, ENAMETOOLONG);
  int fd;
  do fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) die_file(path, errno);
  switch (g_cfg.read_mode) {
    case kRead: read_chunks(fd, path, buf, 0); break;
    case kPread: read_chunks(fd, path, buf, 1); break;
    case kMmap: touch_pages(fd, path); break;
  }
  if (close(fd) != 0) die_file(path, errno);
  sleep_us(g_cfg.rpc_us);
  spin_us(g_cfg.decode_us);
}

/* ---- handoffs ---- */

static void pipe_put(int32_t id) {
  while (sem_wait(&g_slots) != 0)
    if (errno != EINTR) die("sem_wait", errno);
  ssize_t n;
  do n = write(g_pipe[1], &id, sizeof id); /* under PIPE_BUF: atomic */
  while (n < 0 && errno == EINTR);
  if (n < 0) die("write batch pipe", errno);
  if (n != (ssize_t)sizeof id) die("write batch pipe", EIO);
}

static int32_t pipe_take(void) {
  int32_t id;
  size_t got = 0;
  while (got < sizeof id) {
    const ssize_t n = read(g_pipe[0], (char*)&id + got, sizeof id - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("read batch pipe", errno);
    if (n == 0) die("read batch pipe", EPIPE);
    got += (size_t)n;
  }
  if (sem_post(&g_slots) != 0) die("sem_post", errno);
  return id;
}

static void ring_put(int32_t id) {
  check_pt(pthread_mutex_lock(&g_mu), "pthread_mutex_lock");
  while (g_count == g_cfg.queue) check_pt(pthread_cond_wait(&g_not_full, &g_mu), "pthread_cond_wait");
  g_ring[(g_head + g_count) % g_cfg.queue] = id;
  ++g_count;
  check_pt(pthread_cond_signal(&g_not_empty), "pthread_cond_signal");
  check_pt(pthread_mutex_unlock(&g_mu), "pthread_mutex_unlock");
}

static int32_t ring_take(void) {
  check_pt(pthread_mutex_lock(&g_mu), "pthread_mutex_lock");
  while (g_count == 0) check_pt(pthread_cond_wait(&g_not_empty, &g_mu), "pthread_cond_wait");
  const int32_t id = g_ring[g_head];
  g_head = (int)((g_head + 1) % g_cfg.queue);
  --g_count;
  check_pt(pthread_cond_signal(&g_not_full), "pthread_cond_signal");
  check_pt(pthread_mutex_unlock(&g_mu), "pthread_mutex_unlock");
  return id;
}

/* ---- loaders and trainer ---- */

static void* loader_main(void* arg) {
  (void)arg;
  char* buf = malloc(kChunk);
  if (buf == NULL) die("malloc", ENOMEM);
  for (;;) {
    const long b = atomic_fetch_add(&g_next_batch, 1);
    if (b >= g_cfg.steps) break;
    for (long k = 0; k < g_cfg.batch; ++k) load_sample(b * g_cfg.batch + k, buf);
    if (g_cfg.handoff == kPipe) pipe_put((int32_t)b);
    else ring_put((int32_t)b);
  }
  free(buf);
  return NULL;
}

static void run_trainer(void) {
  int64_t prev = 0;
  for (long s = 0; s < g_cfg.steps; ++s) {
    const int64_t t0 = now_ns(CLOCK_MONOTONIC);
    if (s == 0) prev = t0;
    const int32_t id = g_cfg.handoff == kPipe ? pipe_take() : ring_take();
    const int64_t t1 = now_ns(CLOCK_MONOTONIC);
    if (id < 0 || id >= g_cfg.steps) die("batch id out of range", EPROTO);
    spin_us(g_cfg.compute_us);
    const int64_t t2 = now_ns(CLOCK_MONOTONIC);
    printf("step %ld: %.3f ms wait %.3f ms\n", s, (double)(t2 - prev) / 1e6, (double)(t1 - t0) / 1e6);
    if (fflush(stdout) != 0) die("stdout", errno);
    prev = t2;
  }
  printf("done %ld steps\n", g_cfg.steps);
  if (fflush(stdout) != 0) die("stdout", errno);
}

/* ---- command line ---- */

static void usage(FILE* out) {
  fputs("usage: accuracy_native_pipeline --data DIR [options]\n"
        "  --data DIR          sample files f0 .. f{N-1} (required)\n"
        "  --files N           number of files, 1..1000000 (16)\n"
        "  --steps S           steps, 1..1000000 (40)\n"
        "  --batch B           samples per batch, 1..4096 (4)\n"
        "  --loaders L         loader threads, 1..16 (1)\n"
        "  --queue Q           batches in flight, 1..64 (2)\n"
        "  --handoff K         pipe | condvar (pipe)\n"
        "  --read R            read | pread | mmap (read)\n"
        "  --decode-us U       CPU spin per sample, us (0)\n"
        "  --rpc-us U          off-CPU sleep per sample, us (0)\n"
        "  --compute-us U      trainer CPU spin per step, us (0)\n",
        out);
}

__attribute__((format(printf, 1, 2))) static _Noreturn void bad_args(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("native_pipeline: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  usage(stderr);
  exit(2);
}

struct IntOption { int key; const char* name; long* field; long min, max; };
static const struct IntOption kIntOptions[] = {
    {'f', "--files", &g_cfg.files, 1, 1000000},      {'s', "--steps", &g_cfg.steps, 1, 1000000},
    {'b', "--batch", &g_cfg.batch, 1, 4096},         {'l', "--loaders", &g_cfg.loaders, 1, kMaxLoaders},
    {'q', "--queue", &g_cfg.queue, 1, kMaxQueue},    {'D', "--decode-us", &g_cfg.decode_us, 0, 60000000},
    {'R', "--rpc-us", &g_cfg.rpc_us, 0, 60000000},   {'C', "--compute-us", &g_cfg.compute_us, 0, 60000000},
};

static void parse_int_option(int key, const char* value) {
  for (size_t i = 0; i < sizeof kIntOptions / sizeof kIntOptions[0]; ++i) {
    const struct IntOption* o = &kIntOptions[i];
    if (o->key != key) continue;
    char* end;
    errno = 0;
    const long v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < o->min || v > o->max)
      bad_args("bad value for %s: '%s' (an integer, %ld..%ld)", o->name, value, o->min, o->max);
    *o->field = v;
    return;
  }
}

static void parse_enum_option(int key, const char* value) {
  if (key == 'h') {
    if (strcmp(value, "pipe") == 0) g_cfg.handoff = kPipe;
    else if (strcmp(value, "condvar") == 0) g_cfg.handoff = kCondvar;
    else bad_args("bad value for --handoff: '%s' (pipe or condvar)", value);
  } else {
    if (strcmp(value, "read") == 0) g_cfg.read_mode = kRead;
    else if (strcmp(value, "pread") == 0) g_cfg.read_mode = kPread;
    else if (strcmp(value, "mmap") == 0) g_cfg.read_mode = kMmap;
    else bad_args("bad value for --read: '%s' (read, pread or mmap)", value);
  }
}

static void parse_args(int argc, char** argv) {
  static const struct option kLong[] = {
      {"data", required_argument, NULL, 'd'},    {"files", required_argument, NULL, 'f'},
      {"steps", required_argument, NULL, 's'},   {"batch", required_argument, NULL, 'b'},
      {"loaders", required_argument, NULL, 'l'}, {"queue", required_argument, NULL, 'q'},
      {"handoff", required_argument, NULL, 'h'}, {"read", required_argument, NULL, 'r'},
      {"decode-us", required_argument, NULL, 'D'}, {"rpc-us", required_argument, NULL, 'R'},
      {"compute-us", required_argument, NULL, 'C'}, {"help", no_argument, NULL, 'H'},
      {NULL, 0, NULL, 0}};
  opterr = 0; /* our own one-line messages */
  int key;
  while ((key = getopt_long(argc, argv, ":", kLong, NULL)) != -1) {
    if (key == 'H') { usage(stdout); exit(0); }
    if (key == ':') bad_args("option %s needs a value", argv[optind - 1]);
    if (key == '?') bad_args("unknown option '%s'", argv[optind - 1]);
    if (key == 'd') g_cfg.data = optarg;
    else if (key == 'h' || key == 'r') parse_enum_option(key, optarg);
    else parse_int_option(key, optarg);
  }
  if (optind < argc) bad_args("unexpected argument '%s'", argv[optind]);
  if (g_cfg.data == NULL) bad_args("--data DIR is required");
}

static void setup_handoff(void) {
  if (g_cfg.handoff != kPipe) return;
  if (pipe2(g_pipe, O_CLOEXEC) != 0) die("pipe2", errno);
  if (sem_init(&g_slots, 0, (unsigned)g_cfg.queue) != 0) die("sem_init", errno);
}

static void teardown_handoff(void) {
  if (g_cfg.handoff != kPipe) return;
  if (close(g_pipe[0]) != 0) die("close", errno);
  if (close(g_pipe[1]) != 0) die("close", errno);
  if (sem_destroy(&g_slots) != 0) die("sem_destroy", errno);
}

int main(int argc, char** argv) {
  parse_args(argc, argv);
  setup_handoff();
  pthread_t loaders[kMaxLoaders];
  for (long i = 0; i < g_cfg.loaders; ++i)
    check_pt(pthread_create(&loaders[i], NULL, loader_main, NULL), "pthread_create");
  run_trainer();
  for (long i = 0; i < g_cfg.loaders; ++i) check_pt(pthread_join(loaders[i], NULL), "pthread_join");
  teardown_handoff();
  return 0;
}
