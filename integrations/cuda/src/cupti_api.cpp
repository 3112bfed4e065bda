// Loading CUPTI (see cupti_api.hpp).
#include "cupti_api.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cerrno>
#include <cstdlib>

namespace stallscope::cuda {
namespace {

// Sonames of CUPTI releases a program may have loaded, newest first.
constexpr const char* kSonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8",
                                    "libcupti.so"};

// The file a loaded library came from ("" when unknown).
std::string file_of(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr)
    return "";
  return map->l_name;
}

// The CUPTI beside the CUDA runtime the program loaded: pip's CUDA wheels
// (PyTorch's) keep both in one folder (site-packages/nvidia/cu13/lib with
// torch 2.15), on no search path.
void* open_beside_cudart(std::string* path) {
  for (const char* rt : {"libcudart.so.13", "libcudart.so.12"}) {
    void* h = dlopen(rt, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) continue;
    const std::string file = file_of(h);
    dlclose(h);
    const size_t slash = file.rfind('/');
    if (slash == std::string::npos) continue;
    for (const char* n : kSonames) {
      const std::string candidate = file.substr(0, slash + 1) + n;
      if (void* c = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return *path = candidate, c;
    }
  }
  return nullptr;
}

void* open_cupti(CuptiApi* api, std::string* why) {
  std::string* path = &api->path;
  for (const char* n : kSonames)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_NOLOAD))
      return *path = n, api->origin = "already loaded by the program", h;
  if (const char* env = std::getenv("STALLSCOPE_CUPTI_LIB"); env && *env) {
    if (void* h = dlopen(env, RTLD_NOW | RTLD_LOCAL))
      return *path = env, api->origin = "STALLSCOPE_CUPTI_LIB", h;
    *why = std::string("STALLSCOPE_CUPTI_LIB=") + env + ": " + dlerror();
    return nullptr;
  }
  if (void* h = open_beside_cudart(path)) return api->origin = "beside the program's CUDA runtime", h;
  for (const char* n : {"libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                        "/usr/local/cuda/lib64/libcupti.so", "libcupti.so"})
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL))
      return *path = n, api->origin = "the CUDA toolkit's", h;
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
    api->handle = open_cupti(api, why);
    if (api->handle == nullptr) return -ENOENT;
    if (std::string file = file_of(api->handle); !file.empty()) api->path = std::move(file);
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
