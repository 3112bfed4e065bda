// Loader notes on stderr, and the io_uring checking macro.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstring>

#include "stallscope/internal/note.hpp"

namespace stallscope::loader::detail {

// "stallscope loader: <text>" on stderr unless STALLSCOPE_QUIET is on
// (stallscope/internal/note.hpp).
inline void note(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
inline void note(const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  internal::vnote("stallscope loader: ", fmt, ap);
  va_end(ap);
}
// As note(), once per process for each distinct `flag`.
#define STALLSCOPE_LOADER_NOTE_ONCE(...)                                           \
  do {                                                                             \
    static std::atomic<bool> stallscope_said_{false};                              \
    if (!stallscope_said_.exchange(true)) ::stallscope::loader::detail::note(__VA_ARGS__); \
  } while (0)

// Logs a failed liburing call with its text and file:line; returns rc.
inline int uring_failed(int rc, const char* call, const char* file, int line) noexcept {
  note("io_uring call `%s` failed: %s (%d) at %s:%d", call, std::strerror(-rc), rc, file, line);
  return rc;
}

}  // namespace stallscope::loader::detail

// Evaluates a liburing call returning 0/count or -errno; on failure logs
// "io_uring call `<call>` failed: <strerror> at file:line" and yields the
// negative value, so callers write: if (int rc = STALLSCOPE_URING_CHECK(x); rc < 0) ...
#define STALLSCOPE_URING_CHECK(call)                                               \
  ([&]() noexcept {                                                                \
    const int stallscope_rc_ = (call);                                             \
    return stallscope_rc_ < 0                                                      \
               ? ::stallscope::loader::detail::uring_failed(stallscope_rc_, #call, \
                                                            __FILE__, __LINE__)    \
               : stallscope_rc_;                                                   \
  }())
