// Text from traces (thread, host, path and kernel names) is whatever the
// traced program put there: printed raw, "\e]0;...\a" would retitle the
// reader's terminal and "\e[2J" clear it (RELIABILITY.md 31).
#include <cstdint>
#include <cstdio>

#include "stallscope/file_summary.hpp"

namespace stallscope::reader {

namespace {

void escape_byte(std::string& out, unsigned char c) {
  char buf[5];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

// Length of the valid UTF-8 sequence at s[i] (a code point >= U+00A0: C1
// controls are not text), or 0.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0xC2 && c <= 0xDF && cont(1)) return c == 0xC2 && b(1) < 0xA0 ? 0 : 2;
  if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0; // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0; // past U+10FFFF
    return 4;
  }
  return 0;
}

// Length of a colour sequence ESC [ (digits ;)* m at s[i], or 0.
size_t sgr_length(std::string_view s, size_t i) {
  if (i + 2 >= s.size() || s[i + 1] != '[') return 0;
  for (size_t k = i + 2; k < s.size() && k < i + 32; ++k) {
    if (s[k] == 'm') return k - i + 1;
    if ((s[k] < '0' || s[k] > '9') && s[k] != ';') return 0;
  }
  return 0;
}

}  // namespace

std::string terminal_safe(std::string_view text, bool keep_sgr) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n' || c == '\t') {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = c == 0x1B && keep_sgr ? sgr_length(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else if (size_t u = c >= 0x80 ? utf8_length(text, i) : 0; u > 0) {
      out.append(text.substr(i, u));
      i += u;
    } else {
      escape_byte(out, c);
      ++i;
    }
  }
  return out;
}

}  // namespace stallscope::reader
