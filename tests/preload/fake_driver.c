/* Does what the CUDA driver does at cuInit: loads CUDA_INJECTION64_PATH
 * and calls its InitializeInjection (twice: the second must do nothing). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  const char* path = getenv("CUDA_INJECTION64_PATH");
  if (path == NULL) { printf("NO_INJECTION\n"); return 1; }
  void* lib = dlopen(path, RTLD_NOW);
  if (lib == NULL) { printf("DLOPEN_FAILED %s\n", dlerror()); return 1; }
  int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
  if (init == NULL) { printf("NO_ENTRY\n"); return 1; }
  printf("INIT %d\n", init());
  printf("INIT2 %d\n", init());
  /* Another tool taking CUPTI over (resolved as its own link would be). */
  int (*subscribe)(void*, void*, void*) = (int (*)(void*, void*, void*))dlsym(RTLD_DEFAULT, "cuptiSubscribe");
  if (subscribe != NULL) {
    void* handle = NULL;
    printf("SUBSCRIBE %d\n", subscribe(&handle, NULL, NULL));
  }
  return 0;
}
