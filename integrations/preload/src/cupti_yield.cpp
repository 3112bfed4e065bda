// CUPTI hand-over: CUPTI has one subscriber per process. The shim exports
// the calls another tool (the PyTorch profiler, Nsight) makes to take it
// over; before forwarding one to CUPTI, it asks libstallscope_cuda.so
// (when loaded) to step aside (docs/gpu.md). stallscope's own library
// calls CUPTI through its own handle and never comes here.
#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "shim.hpp"

namespace stallscope::preload {

namespace {

using RequestFn = int (*)(const char*, const char*);
std::atomic<RequestFn> g_request{nullptr};

constexpr int kMultipleSubscribers = 39;  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
constexpr int kUnknown = 999;             // CUPTI_ERROR_UNKNOWN

// 1: forward the call to CUPTI; 0: refuse it as CUPTI would.
int ask(const char* api, void* caller) {
  RequestFn fn = g_request.load(std::memory_order_acquire);
  if (fn == nullptr) return 1;
  Dl_info info{};
  const char* who = "unknown library";
  if (::dladdr(caller, &info) != 0 && info.dli_fname != nullptr) {
    const char* slash = std::strrchr(info.dli_fname, '/');
    who = slash != nullptr ? slash + 1 : info.dli_fname;
  }
  Guard guard;  // stallscope's flush and unsubscribe are not traced
  return fn(api, who);
}

template <typename Fn, typename... Args>
int forward(const char* api, void* caller, Args... args) {
  if (ask(api, caller) == 0) return kMultipleSubscribers;
  auto real = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, api));
  return real != nullptr ? real(args...) : kUnknown;
}

}  // namespace

// Called once libstallscope_cuda.so attached (cuda_inject.cpp).
void cupti_yield_enable(void* cuda_lib) noexcept {
  auto fn = reinterpret_cast<RequestFn>(::dlsym(cuda_lib, "stallscope_cuda_cupti_request_v1"));
  g_request.store(fn, std::memory_order_release);
}

}  // namespace stallscope::preload

using stallscope::preload::forward;

STALLSCOPE_SHIM_EXPORT int cuptiSubscribe(void* sub, void* cb, void* userdata) {
  return forward<int (*)(void*, void*, void*)>("cuptiSubscribe", __builtin_return_address(0), sub,
                                               cb, userdata);
}
STALLSCOPE_SHIM_EXPORT int cuptiSubscribe_v2(void* sub, void* cb, void* userdata, void* params) {
  return forward<int (*)(void*, void*, void*, void*)>(
      "cuptiSubscribe_v2", __builtin_return_address(0), sub, cb, userdata, params);
}
STALLSCOPE_SHIM_EXPORT int cuptiActivityRegisterCallbacks(void* request, void* complete) {
  return forward<int (*)(void*, void*)>("cuptiActivityRegisterCallbacks",
                                        __builtin_return_address(0), request, complete);
}
STALLSCOPE_SHIM_EXPORT int cuptiActivityRegisterTimestampCallback(void* cb) {
  return forward<int (*)(void*)>("cuptiActivityRegisterTimestampCallback",
                                 __builtin_return_address(0), cb);
}
