// A stand-in for the shim's CUPTI hand-over (the shim's own is
// integrations/preload/src/cupti_yield.cpp), so test_cupti_source can drive
// libstallscope_cuda.so's side of RELIABILITY.md 16 without LD_PRELOAD.
// CUPTI is process-wide: one
// subscriber, one set of buffer and timestamp callbacks. The shim exports
// the four CUPTI entry points through which another tool (the PyTorch
// profiler, Nsight Systems' injection) takes CUPTI; before forwarding such a
// call to the real CUPTI it lets libstallscope_cuda.so step aside (flush,
// disable its kinds, unsubscribe, record the hand-over) through
// stallscope_cuda_cupti_request_v1. stallscope's own CUPTI calls go through
// the handle of the CUPTI it loaded and never arrive here.
//
// The shim links no CUDA, so the CUPTI types are declared opaquely here:
// every argument is passed through untouched.
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "shim.hpp"

namespace {

using CuptiResult = int;                          // CUptiResult
constexpr CuptiResult kMultipleSubscribers = 39;  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
constexpr CuptiResult kNotInitialized = 15;       // CUPTI_ERROR_NOT_INITIALIZED
using Callback = void (*)();                      // any CUPTI callback type
struct SubscriberParams {                         // the leading fields of CUpti_SubscriberParams
  size_t struct_size;
  const char* subscriber_name;
};

using RequestFn = int (*)(const char*, const char*);

// The library a return address belongs to, by file name ("libtorch_cuda.so").
std::string caller_name(const void* ret) {
  Dl_info info{};
  if (ret == nullptr || dladdr(ret, &info) == 0 || info.dli_fname == nullptr)
    return "another library";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

// Asks libstallscope_cuda.so, if loaded; true = forward the call.
bool may_forward(const char* api, const std::string& who) {
  void* lib = dlopen("libstallscope_cuda.so", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return true;  // CUDA never initialized under the shim
  auto request = reinterpret_cast<RequestFn>(dlsym(lib, "stallscope_cuda_cupti_request_v1"));
  const bool forward = request == nullptr || request(api, who.c_str()) != 0;
  dlclose(lib);  // drops only the reference NOLOAD took
  return forward;
}

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

STALLSCOPE_SHIM_EXPORT CuptiResult cuptiSubscribe(void* subscriber, Callback callback,
                                                  void* userdata) {
  using Fn = CuptiResult (*)(void*, Callback, void*);
  const std::string who = caller_name(__builtin_return_address(0));
  if (!may_forward("cuptiSubscribe", who)) return kMultipleSubscribers;
  Fn real = next<Fn>("cuptiSubscribe");
  return real ? real(subscriber, callback, userdata) : kNotInitialized;
}

STALLSCOPE_SHIM_EXPORT CuptiResult cuptiSubscribe_v2(void* subscriber, Callback callback,
                                                     void* userdata, SubscriberParams* params) {
  using Fn = CuptiResult (*)(void*, Callback, void*, SubscriberParams*);
  std::string who = caller_name(__builtin_return_address(0));
  if (params != nullptr && params->struct_size >= sizeof(SubscriberParams) &&
      params->subscriber_name != nullptr)
    who = std::string(params->subscriber_name) + " in " + who;
  if (!may_forward("cuptiSubscribe_v2", who)) return kMultipleSubscribers;
  Fn real = next<Fn>("cuptiSubscribe_v2");
  return real ? real(subscriber, callback, userdata, params) : kNotInitialized;
}

STALLSCOPE_SHIM_EXPORT CuptiResult cuptiActivityRegisterCallbacks(Callback request,
                                                                  Callback complete) {
  using Fn = CuptiResult (*)(Callback, Callback);
  if (!may_forward("cuptiActivityRegisterCallbacks", caller_name(__builtin_return_address(0))))
    return kMultipleSubscribers;
  Fn real = next<Fn>("cuptiActivityRegisterCallbacks");
  return real ? real(request, complete) : kNotInitialized;
}

STALLSCOPE_SHIM_EXPORT CuptiResult cuptiActivityRegisterTimestampCallback(Callback timestamp) {
  using Fn = CuptiResult (*)(Callback);
  if (!may_forward("cuptiActivityRegisterTimestampCallback",
                   caller_name(__builtin_return_address(0))))
    return kMultipleSubscribers;
  Fn real = next<Fn>("cuptiActivityRegisterTimestampCallback");
  return real ? real(timestamp) : kNotInitialized;
}
