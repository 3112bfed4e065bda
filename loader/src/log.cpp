#include "log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stallscope::loader::detail {

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
  std::fprintf(stderr, "stallscope loader: %s\n", line);
}

int uring_failed(int rc, const char* call, const char* file, int line) noexcept {
  note("io_uring call `%s` failed: %s (%d) at %s:%d", call, std::strerror(-rc), rc, file, line);
  return rc;
}

}  // namespace stallscope::loader::detail
