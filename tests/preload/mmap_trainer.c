/* A C trainer bottlenecked on reads from a memory-mapped file, knowing
 * nothing of stallscope: a loader thread touches each batch's pages of a
 * mapping dropped from the page cache (read-around off, so one major fault
 * per page), then hands the batch id to the trainer over a pipe; the
 * trainer blocks on the pipe, then "trains" (CPU spin).
 *   mmap_trainer FILE PAGES_PER_BATCH STEPS TRAIN_MS
 * FILE must hold PAGES_PER_BATCH * STEPS pages. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const volatile unsigned char* g_map;
static long g_page, g_per_batch, g_steps;
static int g_train_ms, g_pipe[2];

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void spin_ms(int ms) {
  const double end = cpu_now() + ms * 1e-3;
  volatile uint64_t x = 1;
  while (cpu_now() < end)
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1;
}

static void* loader(void* arg) {
  (void)arg;
  unsigned sum = 0;
  for (int64_t s = 0; s < g_steps; ++s) {
    for (long p = s * g_per_batch; p < (s + 1) * g_per_batch; ++p) sum += g_map[p * g_page];
    if (write(g_pipe[1], &s, sizeof s) != sizeof s) exit(4);
  }
  return sum == 12345u ? (void*)1 : NULL;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: mmap_trainer FILE PAGES_PER_BATCH STEPS TRAIN_MS\n");
    return 2;
  }
  g_page = sysconf(_SC_PAGESIZE);
  g_per_batch = atol(argv[2]);
  g_steps = atol(argv[3]);
  g_train_ms = atoi(argv[4]);
  const int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < g_per_batch * g_steps * g_page) return 2;
  void* map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED || madvise(map, (size_t)st.st_size, MADV_RANDOM) != 0) return 2;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  g_map = map;
  if (pipe(g_pipe) != 0) return 2;
  pthread_t th;
  if (pthread_create(&th, NULL, loader, NULL) != 0) return 2;
  for (int64_t s = 0; s < g_steps; ++s) {
    int64_t id;
    if (read(g_pipe[0], &id, sizeof id) != sizeof id || id != s) return 5;
    spin_ms(g_train_ms);
  }
  pthread_join(th, NULL);
  printf("STEPS %ld\n", g_steps);
  return 0;
}
