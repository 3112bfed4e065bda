// A native program with one hot function: burn_cpu() spins for the
// milliseconds given as argv[1] (default 300), called through run_work()
// from main. Built with and without frame pointers (tests/preload), it is
// the workload of test_preload_native_stacks.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

__attribute__((noinline)) double burn_cpu(double ms) {
  volatile double x = 1.0;
  const double end = now_ms() + ms;
  while (now_ms() < end) {
    for (int i = 0; i < 20000; ++i) x = x * 1.0000001 + 1e-9;
  }
  return x;
}

__attribute__((noinline)) double run_work(double ms) { return burn_cpu(ms) + 1.0; }

int main(int argc, char** argv) {
  const double ms = argc > 1 ? atof(argv[1]) : 300.0;
  printf("result %d\n", (int)run_work(ms));
  return 0;
}
