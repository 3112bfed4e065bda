/* A C trainer whose loader thread hands batches over through a
 * condition-variable queue (no pipe, no stallscope): the loader "decodes"
 * each batch (CPU spin) and pushes it; the trainer pops, waiting on the
 * queue's not_empty condition variable, then "trains".
 *   relay_trainer STEPS DECODE_MS TRAIN_MS
 * Prints LOADER_TID and STEPS. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kCap = 4 };
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_not_empty, g_not_full;
static int g_queue[kCap], g_head, g_count, g_steps, g_decode_ms, g_train_ms;
static volatile long g_loader_tid;

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

static void* loader(void* arg) {
  (void)arg;
  g_loader_tid = syscall(SYS_gettid);
  for (int s = 0; s < g_steps; ++s) {
    spin_ms(g_decode_ms);
    pthread_mutex_lock(&g_mu);
    while (g_count == kCap) pthread_cond_wait(&g_not_full, &g_mu);
    g_queue[(g_head + g_count) % kCap] = s;
    ++g_count;
    pthread_cond_signal(&g_not_empty);
    pthread_mutex_unlock(&g_mu);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) { fprintf(stderr, "usage: relay_trainer STEPS DECODE_MS TRAIN_MS\n"); return 2; }
  g_steps = atoi(argv[1]);
  g_decode_ms = atoi(argv[2]);
  g_train_ms = atoi(argv[3]);
  pthread_cond_init(&g_not_empty, NULL);
  pthread_cond_init(&g_not_full, NULL);
  pthread_t th;
  pthread_create(&th, NULL, loader, NULL);
  for (int s = 0; s < g_steps; ++s) {
    pthread_mutex_lock(&g_mu);
    while (g_count == 0) pthread_cond_wait(&g_not_empty, &g_mu);
    const int id = g_queue[g_head];
    g_head = (g_head + 1) % kCap;
    --g_count;
    pthread_cond_signal(&g_not_full);
    pthread_mutex_unlock(&g_mu);
    if (id != s) { fprintf(stderr, "bad batch\n"); return 5; }
    spin_ms(g_train_ms);
  }
  pthread_join(th, NULL);
  pthread_cond_destroy(&g_not_empty);
  pthread_cond_destroy(&g_not_full);
  printf("LOADER_TID %ld\nSTEPS %d\n", g_loader_tid, g_steps);
  return 0;
}
