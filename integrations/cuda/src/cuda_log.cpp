#include "cuda_log.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stallscope::cuda {
namespace {
bool quiet() noexcept {
  static const bool q = [] {
    const char* v = std::getenv("STALLSCOPE_QUIET");
    return v != nullptr && (std::strcmp(v, "on") == 0 || std::strcmp(v, "1") == 0);
  }();
  return q;
}
}  // namespace

void note(const char* fmt, ...) noexcept {
  if (quiet()) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "stallscope: %s\n", line);
}

int cupti_failed(int rc, const char* call, const char* file, int line) noexcept {
  note("CUPTI call `%s` failed: CUPTI error %d at %s:%d", call, rc, file, line);
  return rc;
}

}  // namespace stallscope::cuda
