/* A program whose C++ code brings its own C++ runtime, as a conda
 * environment's Python does: the program itself needs no libstdc++; it
 * dlopens a module (libown_cxx_module.so, beside it) that needs
 * libstdc++.so.6 and finds it through its RUNPATH, in own-runtime/. Prints
 * the module's greeting, then each libstdc++ mapped into the process
 * ("libstdc++ PATH"); exits 0, or 1 when the module cannot be loaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int print_libstdcxx(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libstdc++") != NULL)
    printf("libstdc++ %s\n", info->dlpi_name);
  return 0;
}

int main(void) {
  char exe[PATH_MAX], module[PATH_MAX + 32];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 1;
  exe[n] = '\0';
  snprintf(module, sizeof module, "%s/libown_cxx_module.so", dirname(exe));
  void* h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "own_cxx_runtime: %s\n", dlerror());
    return 1;
  }
  const char* (*hello)(void) = (const char* (*)(void))dlsym(h, "own_cxx_module_hello");
  if (hello == NULL) return 1;
  printf("%s\n", hello());
  dl_iterate_phdr(print_libstdcxx, NULL);
  return 0;
}
