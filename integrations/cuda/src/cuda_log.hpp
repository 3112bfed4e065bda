// Notes of the GPU side on stderr, and the CUPTI checking macro.
#pragma once

namespace stallscope::cuda {

// "stallscope: <text>" on stderr unless STALLSCOPE_QUIET is on/1.
void note(const char* fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

// Logs a failed CUPTI call with CUPTI's text and file:line; returns rc.
int cupti_failed(int rc, const char* call, const char* file, int line) noexcept;

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
