/* Large messages over a pipe (no framing): a producer thread writes
 * MESSAGES messages of BYTES bytes, each with one write() call after a
 * 20 ms sleep; the consumer reads each with a loop of read()s (a pipe
 * gives at most 64 KiB per read), then "processes" it (2 ms of CPU spin)
 * before the next: it waits about 18 ms of every 20, input-bound even when
 * other programs hold the CPUs.
 *   big_messages MESSAGES BYTES
 * Prints PRODUCER_TID, READS and MESSAGES. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int g_pipe[2], g_messages;
static size_t g_bytes;
static volatile long g_producer_tid;

static void spin_ms(int ms) {
  struct timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ms * 1000000L);
}

static void* producer(void* arg) {
  (void)arg;
  g_producer_tid = syscall(SYS_gettid);
  char* buf = malloc(g_bytes);
  memset(buf, 'm', g_bytes);
  for (int i = 0; i < g_messages; ++i) {
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    if (write(g_pipe[1], buf, g_bytes) != (ssize_t)g_bytes) exit(4);
  }
  free(buf);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: big_messages MESSAGES BYTES\n"); return 2; }
  g_messages = atoi(argv[1]);
  g_bytes = strtoul(argv[2], NULL, 10);
  if (pipe(g_pipe) != 0) return 2;
  pthread_t th;
  pthread_create(&th, NULL, producer, NULL);
  char* buf = malloc(g_bytes);
  long reads = 0;
  for (int i = 0; i < g_messages; ++i) {
    size_t got = 0;
    while (got < g_bytes) {
      const ssize_t n = read(g_pipe[0], buf + got, g_bytes - got);
      if (n <= 0) { fprintf(stderr, "short message\n"); return 5; }
      got += (size_t)n;
      ++reads;
    }
    spin_ms(2);
  }
  pthread_join(th, NULL);
  printf("PRODUCER_TID %ld\nREADS %ld\nMESSAGES %d\n", g_producer_tid, reads, g_messages);
  return 0;
}
