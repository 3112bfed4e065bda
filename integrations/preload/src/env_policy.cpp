#include "env_policy.hpp"

#include <cstdlib>
#include <cstring>

#include "shim.hpp"

extern char** environ;

namespace stallscope::preload {

const char* const kExcludedPrograms[] = {
    // compilers, linkers, build tools
    "cc", "c++", "gcc", "g++", "cpp", "clang", "clang++", "cc1", "cc1plus", "collect2", "as",
    "ld", "ld.bfd", "ld.gold", "ld.lld", "lto-wrapper", "nvcc", "ptxas", "cicc", "nvlink",
    "fatbinary", "cudafe++", "nvdisasm", "cuobjdump", "make", "ninja", "cmake", "ccache",
    // system tools a trainer or its libraries run for facts
    "ldconfig", "ldconfig.real", "uname", "ldd", "file", "lscpu", "nvidia-smi", "hostname",
    "id", "which", "stty", "tput", "git", "ssh", "scp", "stallscope", nullptr};

namespace {

char g_shim_path[4096];

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

constexpr const char* kInjectionVars[] = {"NVTX_INJECTION64_PATH=", "CUDA_INJECTION64_PATH=",
                                          "NCCL_PROFILER_PLUGIN="};
constexpr const char* kCarriedVars[] = {"STALLSCOPE_OUT=", "STALLSCOPE_RUN_KEY=",
                                        "STALLSCOPE_FOLLOW=", "NVTX_INJECTION64_PATH=",
                                        "CUDA_INJECTION64_PATH=", "NCCL_PROFILER_PLUGIN="};

bool is_ours(const char* value) { return std::strstr(value, "stallscope") != nullptr; }

// LD_PRELOAD without the shim's entries (separated by ':' or ' ').
char* preload_without_shim(const char* entry) {
  const char* list = entry + std::strlen("LD_PRELOAD=");
  char* out = static_cast<char*>(std::malloc(std::strlen(entry) + 1));
  if (out == nullptr) return nullptr;
  std::strcpy(out, "LD_PRELOAD=");
  char* w = out + std::strlen(out);
  while (*list != '\0') {
    const size_t n = std::strcspn(list, ": ");
    if (n > 0 && !(std::strstr(list, "libstallscope_preload") != nullptr &&
                   std::strstr(list, "libstallscope_preload") < list + n)) {
      if (w[-1] != '=') *w++ = ':';
      std::memcpy(w, list, n);
      w += n;
    }
    list += n;
    if (*list != '\0') ++list;
  }
  *w = '\0';
  return out;
}

bool has_var(char* const* envp, const char* prefix) {
  for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    if (starts_with(*e, prefix)) return true;
  }
  return false;
}

char* preload_with_shim(const char* entry) {
  const char* shim = shim_path();
  if (entry != nullptr && std::strstr(entry, "libstallscope_preload") != nullptr) return nullptr;
  const char* rest = entry != nullptr ? entry + std::strlen("LD_PRELOAD=") : "";
  const size_t n = std::strlen("LD_PRELOAD=") + std::strlen(shim) + 1 + std::strlen(rest) + 1;
  char* out = static_cast<char*>(std::malloc(n));
  if (out == nullptr) return nullptr;
  std::strcpy(out, "LD_PRELOAD=");
  std::strcat(out, shim);
  if (*rest != '\0') {
    std::strcat(out, ":");
    std::strcat(out, rest);
  }
  return out;
}

}  // namespace

const char* shim_path() noexcept { return g_shim_path; }
void set_shim_path(const char* path) noexcept {
  std::strncpy(g_shim_path, path, sizeof g_shim_path - 1);
}

bool excluded_program(const char* path) noexcept {
  if (path == nullptr) return false;
  const char* name = base_name(path);
  for (const char* const* p = kExcludedPrograms; *p != nullptr; ++p) {
    if (std::strcmp(name, *p) == 0) return true;
  }
  // Versioned compiler names: gcc-12, g++-12, clang-16, …
  return starts_with(name, "gcc-") || starts_with(name, "g++-") || starts_with(name, "clang-") ||
         starts_with(name, "x86_64-linux-gnu-");
}

bool follow_child(const char* path) noexcept {
  return config().follow_children && !excluded_program(path);
}

char** child_env(char* const* envp, bool follow) noexcept {
  if (envp == nullptr) return nullptr;
  size_t n = 0;
  while (envp[n] != nullptr) ++n;
  const size_t extra = sizeof kCarriedVars / sizeof *kCarriedVars + 1;
  char** out = static_cast<char**>(std::calloc(n + extra + 1, sizeof(char*)));
  if (out == nullptr) return const_cast<char**>(envp);
  size_t k = 0;
  bool preload_seen = false;
  for (size_t i = 0; i < n; ++i) {
    char* e = envp[i];
    if (starts_with(e, "LD_PRELOAD=")) {
      preload_seen = true;
      char* changed = follow ? preload_with_shim(e) : preload_without_shim(e);
      out[k++] = changed != nullptr ? changed : e;
      continue;
    }
    bool drop = false;
    for (const char* v : kInjectionVars) drop |= !follow && starts_with(e, v) && is_ours(e);
    if (!drop) out[k++] = e;
  }
  if (follow) {
    if (!preload_seen && shim_path()[0] != '\0') {
      if (char* p = preload_with_shim(nullptr)) out[k++] = p;
    }
    for (const char* v : kCarriedVars) {  // what the caller's environment lost
      if (has_var(out, v)) continue;
      const bool injection = !starts_with(v, "STALLSCOPE_");
      for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        if (starts_with(*e, v) && (!injection || is_ours(*e))) { out[k++] = *e; break; }
      }
    }
  }
  out[k] = nullptr;
  return out;
}

void free_child_env(char** env, char* const* envp) noexcept {
  if (env == nullptr || env == envp) return;
  for (char** e = env; *e != nullptr; ++e) {
    bool borrowed = false;
    for (char* const* o = envp; o != nullptr && *o != nullptr && !borrowed; ++o) borrowed = *o == *e;
    for (char** o = environ; o != nullptr && *o != nullptr && !borrowed; ++o) borrowed = *o == *e;
    if (!borrowed) std::free(*e);
  }
  std::free(env);
}

void scrub_own_env() noexcept {
  char** cleaned = child_env(environ, false);
  if (cleaned != nullptr && cleaned != environ) environ = cleaned;
}

}  // namespace stallscope::preload
