#include "real.hpp"

#include <dlfcn.h>

namespace stallscope::preload {
namespace {
thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;
}  // namespace

bool resolving() noexcept { return t_resolving; }

void* resolve_next(const char* name, const char* version) noexcept {
  t_resolving = true;
  void* p = version != nullptr ? ::dlvsym(RTLD_NEXT, name, version) : nullptr;
  if (p == nullptr) p = ::dlsym(RTLD_NEXT, name);
  t_resolving = false;
  return p;
}

}  // namespace stallscope::preload
