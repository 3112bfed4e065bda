/* A program that reads a file through a memory mapping, knowing nothing of
 * stallscope. Usage: mmap_reader FILE PAGES THREADS [--fork]
 *
 * Reads 4 KiB of FILE with pread (an ordinary, interposed read), maps it,
 * turns read-around off (MADV_RANDOM) and drops it from the page cache, so
 * that each page touched is one major fault. THREADS threads then touch
 * pages 0..PAGES-1 (thread k: pages k, k+THREADS, ...). With --fork, a
 * forked child then touches pages PAGES..2*PAGES-1 (the file must be that
 * long). Prints "RESIDENT n" (pages still cached after dropping), one
 * "THREAD tid majflt touched" line per thread and, with --fork, a
 * "CHILD tid majflt touched" line. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const volatile unsigned char* g_map;
static long g_page;
static long g_first, g_pages, g_threads;

struct Job {
  long k;
  long tid, majflt, touched;
  unsigned sum;
};

static long majflt_now(void) {
  struct rusage ru;
  return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_majflt : -1;
}

static void* touch(void* arg) {
  struct Job* j = arg;
  j->tid = (long)syscall(SYS_gettid);
  const long before = majflt_now();
  for (long p = g_first + j->k; p < g_first + g_pages; p += g_threads) {
    j->sum += g_map[p * g_page];
    ++j->touched;
  }
  j->majflt = majflt_now() - before;
  return NULL;
}

static long resident_pages(const void* map, size_t bytes) {
  const size_t n = (bytes + (size_t)g_page - 1) / (size_t)g_page;
  unsigned char* vec = malloc(n);
  long resident = 0;
  if (vec != NULL && mincore((void*)map, bytes, vec) == 0) {
    for (size_t i = 0; i < n; ++i) resident += vec[i] & 1;
  }
  free(vec);
  return resident;
}

static int child_touch(void) {
  g_first = g_pages;
  g_threads = 1;
  struct Job j = {0, 0, 0, 0, 0};
  touch(&j);
  printf("CHILD %ld %ld %ld\n", j.tid, j.majflt, j.touched);
  fflush(stdout);
  return j.sum == 12345u ? 3 : 0; /* keeps the reads */
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: mmap_reader FILE PAGES THREADS [--fork]\n");
    return 2;
  }
  g_page = sysconf(_SC_PAGESIZE);
  g_pages = atol(argv[2]);
  g_threads = atol(argv[3]);
  const int do_fork = argc > 4 && strcmp(argv[4], "--fork") == 0;
  const int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || g_threads < 1 || g_threads > 64 ||
      st.st_size < (do_fork ? 2 : 1) * g_pages * g_page) {
    fprintf(stderr, "mmap_reader: bad file or arguments\n");
    return 2;
  }
  char head[4096];
  if (pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head) return 2;
  void* map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return 2;
  g_map = map;
  if (madvise(map, (size_t)st.st_size, MADV_RANDOM) != 0) return 2;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  printf("RESIDENT %ld\n", resident_pages(map, (size_t)st.st_size));
  pthread_t t[64];
  struct Job jobs[64];
  for (long k = 0; k < g_threads; ++k) {
    jobs[k] = (struct Job){k, 0, 0, 0, 0};
    if (pthread_create(&t[k], NULL, touch, &jobs[k]) != 0) return 2;
  }
  unsigned sum = 0;
  for (long k = 0; k < g_threads; ++k) {
    pthread_join(t[k], NULL);
    printf("THREAD %ld %ld %ld\n", jobs[k].tid, jobs[k].majflt, jobs[k].touched);
    sum += jobs[k].sum;
  }
  fflush(stdout);
  if (do_fork) {
    const pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) exit(child_touch());
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
  }
  return sum == 12345u ? 3 : 0;
}
