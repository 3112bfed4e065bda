/* A C trainer that knows nothing of stallscope: a loader (a thread, or a
 * forked worker process) reads each batch's file and "decodes" it (CPU
 * spin), then hands the batch id to the trainer over a pipe; the trainer
 * blocks on the pipe, then "trains" (CPU spin). Prints what it did so the
 * test can check the trace against it.
 *   trainer DIR NFILES STEPS DECODE_MS TRAIN_MS thread|fork */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* g_dir;
static int g_files, g_steps, g_decode_ms, g_train_ms, g_pipe[2];
static long long g_bytes, g_reads;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void spin_ms(int ms) {
  const double end = cpu_now() + ms * 1e-3;
  volatile uint64_t x = 1;
  while (cpu_now() < end) for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1;
}

static void load_batch(int step, char* buf, size_t cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/f%d", g_dir, step % g_files);
  const int fd = open(path, O_RDONLY);
  if (fd < 0) { perror(path); exit(3); }
  ssize_t n;
  long long off = 0;
  do { /* every call counted, the one that meets end of file too */
    n = pread(fd, buf, cap, off);
    if (n < 0) { perror("pread"); exit(3); }
    off += n; g_bytes += n; ++g_reads;
  } while (n > 0);
  close(fd);
  spin_ms(g_decode_ms);
}

static void* loader(void* arg) {
  (void)arg;
  const size_t cap = 1 << 20;
  char* buf = malloc(cap);
  for (int64_t s = 0; s < g_steps; ++s) {
    load_batch((int)s, buf, cap);
    if (write(g_pipe[1], &s, sizeof s) != sizeof s) exit(4);
  }
  free(buf);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 7) { fprintf(stderr, "usage: trainer DIR NFILES STEPS DECODE_MS TRAIN_MS thread|fork\n"); return 2; }
  g_dir = argv[1];
  g_files = atoi(argv[2]);
  g_steps = atoi(argv[3]);
  g_decode_ms = atoi(argv[4]);
  g_train_ms = atoi(argv[5]);
  const int forked = strcmp(argv[6], "fork") == 0;
  if (pipe(g_pipe) != 0) return 2;
  pthread_t th;
  pid_t child = -1;
  if (forked) {
    child = fork();
    if (child == 0) { close(g_pipe[0]); loader(NULL); printf("LOADER_BYTES %lld\nLOADER_READS %lld\n", g_bytes, g_reads); return 0; }
    close(g_pipe[1]);
  } else {
    pthread_create(&th, NULL, loader, NULL);
  }
  for (int s = 0; s < g_steps; ++s) {
    int64_t id;
    if (read(g_pipe[0], &id, sizeof id) != sizeof id || id != s) { fprintf(stderr, "bad batch\n"); return 5; }
    spin_ms(g_train_ms);
  }
  if (forked) { int st; waitpid(child, &st, 0); }
  else { pthread_join(th, NULL); printf("LOADER_BYTES %lld\nLOADER_READS %lld\n", g_bytes, g_reads); }
  printf("STEPS %d\n", g_steps);
  return 0;
}
