// Notes of the GPU side on stderr, and the CUPTI checking macro.
#pragma once

#include <cstdarg>

#include "stallscope/internal/note.hpp"

namespace stallscope::cuda {

// "stallscope: <text>" on stderr unless STALLSCOPE_QUIET is on
// (stallscope/internal/note.hpp).
inline void note(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
inline void note(const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  internal::vnote("stallscope: ", fmt, ap);
  va_end(ap);
}

// Logs a failed CUPTI call with CUPTI's text and file:line; returns rc.
inline int cupti_failed(int rc, const char* call, const char* file, int line) noexcept {
  note("CUPTI call `%s` failed: CUPTI error %d at %s:%d", call, rc, file, line);
  return rc;
}

}  // namespace stallscope::cuda

// Evaluates a CUPTI call through the loaded table (cupti_api.hpp); on
// failure logs "CUPTI call `<call>` failed: <text> at file:line" and yields
// the CUptiResult, so callers write: if (STALLSCOPE_CUPTI_CHECK(x) != 0) ...
#define STALLSCOPE_CUPTI_CHECK(call)                                                         \
  ([&]() noexcept {                                                                          \
    const int stallscope_rc_ = static_cast<int>(call);                                       \
    return stallscope_rc_ != 0                                                               \
               ? ::stallscope::cuda::cupti_failed(stallscope_rc_, #call, __FILE__, __LINE__) \
               : 0;                                                                          \
  }())
