// JSON read from input files (trace metadata and attachments, topologies,
// saved reports), parsed within limits on size and nesting depth
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

struct Exceeded {
  std::string why;
};

inline std::string mib(size_t bytes) {
  return bytes % (size_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                        : std::to_string(bytes) + " bytes";
}

}  // namespace json_limits_impl

// The value of `text`, or a discarded value (is_discarded()) with `*why`
// saying what was wrong, as a phrase that follows the document's name: "is
// N bytes, over the 4 MiB limit", "nests deeper than 64 levels", "holds
// more than 262144 values", "is not valid JSON (...)". Parsing stops at the
// first value past a limit.
inline nlohmann::json parse_bounded_json(std::string_view text, std::string* why,
                                         JsonLimits limits = {}) {
  namespace impl = json_limits_impl;
  if (text.size() > limits.max_bytes) {
    *why = "is " + std::to_string(text.size()) + " bytes, over the " + impl::mib(limits.max_bytes) +
           " limit";
    return nlohmann::json::value_t::discarded;
  }
  // The callback sees each container's depth (0: the outermost) as it
  // opens, and every value as it ends.
  size_t values = 0;
  const auto check = [&limits, &values](int depth, nlohmann::json::parse_event_t event,
                                        nlohmann::json&) {
    using Event = nlohmann::json::parse_event_t;
    const bool opens = event == Event::object_start || event == Event::array_start;
    if (opens && depth >= limits.max_depth)
      throw impl::Exceeded{"nests deeper than " + std::to_string(limits.max_depth) + " levels"};
    if ((opens || event == Event::value) && ++values > limits.max_values)
      throw impl::Exceeded{"holds more than " + std::to_string(limits.max_values) + " values"};
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const impl::Exceeded& e) {
    *why = e.why;
  } catch (const nlohmann::json::exception& e) {
    *why = std::string("is not valid JSON (") + e.what() + ")";
  }
  return nlohmann::json::value_t::discarded;
}

}  // namespace stallscope::detail
