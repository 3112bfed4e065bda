// The real libc functions behind the shim's wrappers, found lazily with
// dlsym(RTLD_NEXT). dlsym may allocate, and an allocator (jemalloc,
// tcmalloc, a constructor of another library) may open or read a file
// meanwhile: a call that arrives while this thread is resolving gets a raw
// system call instead of recursing (RELIABILITY.md 9).
#pragma once

#include <atomic>

// decltype(&::read) carries libc's nonnull/warn_unused attributes; harmless.
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace stallscope::preload {

// True while the calling thread is inside dlsym.
bool resolving() noexcept;
// dlsym(RTLD_NEXT, name) with the recursion guard; nullptr if unavailable.
// With `version`, dlvsym(RTLD_NEXT, name, version): glibc exports some
// functions in two versions and dlsym may return the older one
// (pthread_cond_* of GLIBC_2.2.5, the pre-NPTL condition variable).
void* resolve_next(const char* name, const char* version = nullptr) noexcept;

// One lazily resolved pointer per wrapped function. `fallback` (may be
// nullptr) serves calls made while dlsym runs.
template <typename Fn>
class Real {
 public:
  constexpr Real(const char* name, Fn fallback, const char* version = nullptr)
      : name_(name), version_(version), fallback_(fallback) {}
  Fn get() noexcept {
    Fn f = fn_.load(std::memory_order_acquire);
    if (__builtin_expect(f != nullptr, 1)) return f;
    if (resolving()) return fallback_;
    f = reinterpret_cast<Fn>(resolve_next(name_, version_));
    if (f != nullptr) fn_.store(f, std::memory_order_release);
    return f != nullptr ? f : fallback_;
  }

 private:
  const char* name_;
  const char* version_;
  Fn fallback_;
  std::atomic<Fn> fn_{nullptr};
};

}  // namespace stallscope::preload

// Declares the real pointer of `name` with the type of the shim's wrapper.
#define STALLSCOPE_REAL(name, fallback) \
  static ::stallscope::preload::Real<decltype(&::name)> real_##name(#name, fallback)
// The same for a symbol of one `version` ("GLIBC_2.3.2").
#define STALLSCOPE_REAL_VERSION(name, version, fallback) \
  static ::stallscope::preload::Real<decltype(&::name)> real_##name(#name, fallback, version)
