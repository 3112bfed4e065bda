// The one integer syntax of every STALLSCOPE_* variable (recorder and
// preload shim alike): an optional '-', decimal digits, nothing else — no
// blanks, no '+', no unit. Header-only and allocation-free, so the shim can
// use it in its constructor.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>

namespace stallscope {

// Parses `text` as an integer in [lo, hi]; false (out unchanged) otherwise.
inline bool parse_env_integer(const char* text, int64_t lo, int64_t hi, int64_t* out) noexcept {
  if (text == nullptr || *text == '\0') return false;
  const char* end = text + std::strlen(text);
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(text, end, x);
  if (ec != std::errc() || p != end || x < lo || x > hi) return false;
  *out = x;
  return true;
}

}  // namespace stallscope
