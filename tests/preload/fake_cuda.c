/* Stands in for libstallscope_cuda.so: its attach entry returns what
 * FAKE_CUDA_RESULT says (0 = attached, -19 = -ENODEV). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((visibility("default"))) int stallscope_cuda_attach_v1(void) {
  const char* r = getenv("FAKE_CUDA_RESULT");
  printf("ATTACH_CALLED\n");
  fflush(stdout);
  return r != NULL ? atoi(r) : 0;
}

/* The CUPTI hand-over request: prints it, answers FAKE_CUPTI_ANSWER. */
__attribute__((visibility("default"))) int stallscope_cuda_cupti_request_v1(const char* api,
                                                                           const char* who) {
  const char* a = getenv("FAKE_CUPTI_ANSWER");
  printf("REQUEST %s %s\n", api, who);
  fflush(stdout);
  return a != NULL ? atoi(a) : 1;
}
