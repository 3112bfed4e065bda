// A streaming JSON text writer: buffers into 64 KiB blocks, escapes strings
// (invalid UTF-8 becomes U+FFFD, so the output always parses) and counts
// bytes. No DOM: the exporters write events as they decode them.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace stallscope::reader::detail {

class JsonOut {
 public:
  explicit JsonOut(std::ostream& out) : out_(out) { buf_.reserve(kBlock + 4096); }
  ~JsonOut() { flush(); }
  JsonOut(const JsonOut&) = delete;
  JsonOut& operator=(const JsonOut&) = delete;

  // Appends `s` verbatim (syntax: braces, keys the caller knows are safe).
  JsonOut& raw(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= kBlock) flush();
    return *this;
  }
  // A quoted, escaped JSON string.
  JsonOut& str(std::string_view s);
  JsonOut& num(uint64_t v);
  JsonOut& num(int64_t v);
  JsonOut& num(double v);  // non-finite values become null
  // Nanoseconds as microseconds with three decimals, exactly ("12.345").
  JsonOut& micros(int64_t ns);
  // ,"key": — `key` must need no escaping.
  JsonOut& key(std::string_view k) { return raw(",\"").raw(k).raw("\":"); }

  void flush();
  // Bytes produced so far, buffered ones included.
  uint64_t bytes() const noexcept { return flushed_ + buf_.size(); }
  bool failed() const noexcept { return !out_.good(); }

 private:
  static constexpr size_t kBlock = 64 * 1024;
  void escape_char(unsigned char c);
  std::ostream& out_;
  std::string buf_;
  uint64_t flushed_ = 0;
};

}  // namespace stallscope::reader::detail
