// Loading CUPTI (see cupti_api.hpp).
#include "cupti_api.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>

namespace stallscope::cuda {
namespace {

// Sonames of CUPTI releases a program may have loaded, newest first.
constexpr const char* kSonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8",
                                    "libcupti.so"};

void* open_cupti(std::string* path, std::string* why) {
  for (const char* n : kSonames)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_NOLOAD)) return *path = n, h;
  if (const char* env = std::getenv("STALLSCOPE_CUPTI_LIB"); env && *env) {
    if (void* h = dlopen(env, RTLD_NOW | RTLD_LOCAL)) return *path = env, h;
    *why = std::string("STALLSCOPE_CUPTI_LIB=") + env + ": " + dlerror();
    return nullptr;
  }
  for (const char* n : {"libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                        "/usr/local/cuda/lib64/libcupti.so", "libcupti.so"})
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return *path = n, h;
  const char* e = dlerror();
  *why = std::string("libcupti not found (") + (e ? e : "?") + "); set STALLSCOPE_CUPTI_LIB";
  return nullptr;
}

template <typename F>
bool bind(void* h, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(h, name));
  return *fn != nullptr;
}

}  // namespace

int load_cupti(CuptiApi* api, std::string* why) noexcept {
  try {
    api->handle = open_cupti(&api->path, why);
    if (api->handle == nullptr) return -ENOENT;
    void* h = api->handle;
    bind(h, "cuptiSubscribe_v2", &api->subscribe_v2);
    bind(h, "cuptiActivityRegisterTimestampCallback", &api->register_timestamp);
    if (!bind(h, "cuptiActivityPushExternalCorrelationId", &api->push_external) ||
        !bind(h, "cuptiActivityPopExternalCorrelationId", &api->pop_external))
      api->push_external = nullptr, api->pop_external = nullptr;
    const bool ok = bind(h, "cuptiSubscribe", &api->subscribe) &&
                    bind(h, "cuptiUnsubscribe", &api->unsubscribe) &&
                    bind(h, "cuptiActivityRegisterCallbacks", &api->register_callbacks) &&
                    bind(h, "cuptiActivityEnable", &api->enable) &&
                    bind(h, "cuptiActivityDisable", &api->disable) &&
                    bind(h, "cuptiActivityFlushAll", &api->flush_all) &&
                    bind(h, "cuptiActivityGetNextRecord", &api->next_record) &&
                    bind(h, "cuptiActivityGetNumDroppedRecords", &api->dropped) &&
                    bind(h, "cuptiGetCallbackName", &api->callback_name) &&
                    bind(h, "cuptiGetTimestamp", &api->timestamp);
    if (!ok) {
      *why = api->path + " lacks a CUPTI function stallscope needs";
      return -ENOENT;
    }
    return 0;
  } catch (...) {
    return -ENOMEM;
  }
}

}  // namespace stallscope::cuda
