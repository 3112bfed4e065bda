#include "stallscope/internal/note.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "stallscope/internal/config.hpp"

namespace stallscope::internal {

namespace {

constexpr size_t kLine = 1024;

// The raw system call: the preload shim interposes write().
void write_line(char* line, size_t n) noexcept {
  line[n] = '\n';
  (void)!::syscall(SYS_write, 2, line, n + 1);
}

size_t put_prefix(char* line, const char* prefix) noexcept {
  const size_t p = std::strlen(prefix);
  const size_t k = p < kLine / 4 ? p : kLine / 4;
  std::memcpy(line, prefix, k);
  return k;
}

}  // namespace

void vnote(const char* prefix, const char* fmt, va_list ap) noexcept {
  if (config::quiet()) return;
  char line[kLine + 1];
  const size_t k = put_prefix(line, prefix);
  const int n = std::vsnprintf(line + k, kLine - k, fmt, ap);
  if (n < 0) return;
  const size_t len =
      k + (static_cast<size_t>(n) < kLine - k ? static_cast<size_t>(n) : kLine - k - 1);
  write_line(line, len);
}

void note(const char* prefix, const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  vnote(prefix, fmt, ap);
  va_end(ap);
}

void note_text(const char* prefix, const char* text) noexcept {
  if (config::quiet()) return;
  char line[kLine + 1];
  const size_t k = put_prefix(line, prefix);
  const size_t t = std::strlen(text);
  const size_t m = t < kLine - k ? t : kLine - k;
  std::memcpy(line + k, text, m);
  write_line(line, k + m);
}

}  // namespace stallscope::internal
