// CUDA injection: the driver loads CUDA_INJECTION64_PATH (the shim) at
// cuInit and calls InitializeInjection. The GPU sources live in
// libstallscope_cuda.so next to the shim, loaded only now, so processes
// that never initialize CUDA never load CUPTI.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <string>

#include "shim.hpp"
#include "stallscope/trace.h"

namespace stallscope::preload {
const char* shim_dir() noexcept;
void cupti_yield_enable(void* cuda_lib) noexcept;
}

namespace {

using AttachFn = int (*)(void);
constexpr const char* kCudaLib = "libstallscope_cuda.so";
constexpr const char* kAttach = "stallscope_cuda_attach_v1";

void unavailable(const std::string& why) {
  const std::string text = "GPU activity unavailable: " + why;
  stallscope::preload::shim_note(text.c_str());
  stallscope_mark(text.c_str());
}

int attach() {
  const std::string path = std::string(stallscope::preload::shim_dir()) + "/" + kCudaLib;
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    unavailable(std::string("cannot load ") + path + ": " + (err ? err : "unknown error"));
    return 0;
  }
  auto fn = reinterpret_cast<AttachFn>(::dlsym(lib, kAttach));
  if (fn == nullptr) {
    unavailable(path + " has no " + kAttach);
    return 0;
  }
  const int rc = fn();
  if (rc < 0) {
    unavailable(std::string(kAttach) + " failed: " + std::strerror(-rc));
    return 0;
  }
  stallscope::preload::cupti_yield_enable(lib);
  return 1;
}

}  // namespace

// Called by the CUDA driver at cuInit (at most once per process; a second
// call, e.g. after a fork, does nothing).
STALLSCOPE_SHIM_EXPORT int InitializeInjection(void) {
  static std::atomic<int> state{-1};
  int expected = -1;
  if (!state.compare_exchange_strong(expected, 0)) return state.load() >= 0 ? 1 : 0;
  stallscope::preload::Guard guard;
  state.store(attach());
  return 1;
}
