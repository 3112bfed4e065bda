// JSON read from input files (trace metadata and attachments, topologies,
// saved reports), parsed within limits on size, nesting depth and values
// (RELIABILITY.md case 32): a hostile file costs bounded memory and stack
// and yields a message instead of a crash.
//
// nlohmann's parser is iterative, but copying, dumping or walking a value
// recurses once per level, so a 60,000-deep object overflows the stack of
// whoever touches it next; and its DOM takes 8-30 bytes per byte of text.
// Header-only: the reader, the analyzer and the topology library share it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace stallscope::detail {

// Containers nested in one another, the outermost included. What stallscope
// writes nests at most 4 deep.
inline constexpr int kMaxJsonDepth = 64;
// Text of one document (an attachment, a topology): some KiB when recorded.
inline constexpr size_t kMaxJsonBytes = size_t{4} << 20;
// Values (containers, keys' values, array elements): each costs 16-100
// bytes of DOM, whatever its text, so this bounds the DOM (~30 MiB).
inline constexpr size_t kMaxJsonValues = size_t{1} << 18;

struct JsonLimits {
  size_t max_bytes = kMaxJsonBytes;
  int max_depth = kMaxJsonDepth;
  size_t max_values = kMaxJsonValues;
};

namespace json_limits_impl {

inline std::string mib(size_t bytes) {
  return bytes % (size_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                        : std::to_string(bytes) + " bytes";
}

// A SAX pass that builds nothing and stops at the first value past a limit.
// (nlohmann's parser callback would do it in one pass, but its DOM builder
// rescans the enclosing container after each one ends: quadratic, 27 s for
// 4 MiB of "[{},{},...]".)
class LimitCheck final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit LimitCheck(const JsonLimits& limits) : limits_(limits) {}
  const std::string& why() const { return why_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::json::exception& e) override {
    why_ = std::string("is not valid JSON (") + e.what() + ")";
    return false;
  }

 private:
  bool value() {
    if (++values_ <= limits_.max_values) return true;
    why_ = "holds more than " + std::to_string(limits_.max_values) + " values";
    return false;
  }
  bool open() {
    if (++depth_ > limits_.max_depth) {
      why_ = "nests deeper than " + std::to_string(limits_.max_depth) + " levels";
      return false;
    }
    return value();
  }
  bool close() {
    --depth_;
    return true;
  }

  const JsonLimits& limits_;
  std::string why_;
  size_t values_ = 0;
  int depth_ = 0;
};

}  // namespace json_limits_impl

// The value of `text`, or a discarded value (is_discarded()) with `*why`
// saying what was wrong, as a phrase that follows the document's name: "is
// N bytes, over the 4 MiB limit", "nests deeper than 64 levels", "holds
// more than 262144 values", "is not valid JSON (...)". Two linear passes:
// the check, then the DOM only for a document within the limits.
inline nlohmann::json parse_bounded_json(std::string_view text, std::string* why,
                                         JsonLimits limits = {}) {
  namespace impl = json_limits_impl;
  if (text.size() > limits.max_bytes) {
    *why = "is " + std::to_string(text.size()) + " bytes, over the " + impl::mib(limits.max_bytes) +
           " limit";
    return nlohmann::json::value_t::discarded;
  }
  impl::LimitCheck check(limits);
  nlohmann::json j = nlohmann::json::value_t::discarded;
  if (nlohmann::json::sax_parse(text.begin(), text.end(), &check))
    j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) *why = check.why().empty() ? "is not valid JSON" : check.why();
  return j;
}

}  // namespace stallscope::detail
