#include "reader/json_writer.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace stallscope::reader::detail {

namespace {

// Length of the valid UTF-8 sequence at s[0] (1–4), or 0 when invalid.
size_t utf8_length(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else
    return 0;
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;  // overlong, surrogate
  return n;
}

}  // namespace

void JsonOut::escape_char(unsigned char c) {
  switch (c) {
    case '"':
      buf_.append("\\\"");
      return;
    case '\\':
      buf_.append("\\\\");
      return;
    case '\n':
      buf_.append("\\n");
      return;
    case '\r':
      buf_.append("\\r");
      return;
    case '\t':
      buf_.append("\\t");
      return;
    default:
      break;
  }
  if (c < 0x20 || c == 0x7F) {
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\u%04x", c);
    buf_.append(esc);
    return;
  }
  buf_.push_back(static_cast<char>(c));
}

JsonOut& JsonOut::str(std::string_view s) {
  buf_.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      escape_char(c);
      ++i;
      continue;
    }
    const size_t n = utf8_length(s.substr(i));
    if (n == 0) {
      buf_.append("\xEF\xBF\xBD");  // U+FFFD for each invalid byte
      ++i;
      continue;
    }
    buf_.append(s.substr(i, n));
    i += n;
  }
  buf_.push_back('"');
  if (buf_.size() >= kBlock) flush();
  return *this;
}

JsonOut& JsonOut::num(uint64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  return raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
}

JsonOut& JsonOut::num(int64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  return raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
}

JsonOut& JsonOut::num(double v) {
  if (!std::isfinite(v)) return raw("null");
  char tmp[32];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  return raw(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
}

JsonOut& JsonOut::micros(int64_t ns) {
  // |ns| <= 2^62 here (the reader clamps times), so negation cannot overflow.
  const bool neg = ns < 0;
  const uint64_t a = neg ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  char tmp[40];
  const int n = std::snprintf(tmp, sizeof tmp, "%s%llu.%03llu", neg ? "-" : "",
                              static_cast<unsigned long long>(a / 1000),
                              static_cast<unsigned long long>(a % 1000));
  return raw(std::string_view(tmp, static_cast<size_t>(n)));
}

void JsonOut::flush() {
  if (buf_.empty()) return;
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  flushed_ += buf_.size();
  buf_.clear();
}

}  // namespace stallscope::reader::detail
