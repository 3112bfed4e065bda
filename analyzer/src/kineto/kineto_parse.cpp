// The JSON walk: simdjson On-Demand over the whole document, keys compared
// on their raw bytes, numbers read from their text (ts in µs with up to
// three decimals becomes exact integer ns), strings left in place (Raw).
#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "kineto/kineto_internal.hpp"

namespace stallscope::analyzer::kineto {

namespace ond = simdjson::ondemand;

namespace {

// `k` (a raw key, after its opening quote) is exactly `lit`.
template <size_t N>
bool key_is(const char* k, const char (&lit)[N]) {
  return std::memcmp(k, lit, N - 1) == 0 && k[N - 1] == '"';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool number_fallback(std::string_view s, double scale, int64_t* out) {
  double d = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec != std::errc() || !std::isfinite(d * scale) || std::fabs(d * scale) > 9.2e18)
    return false;
  *out = std::llround(d * scale);
  return true;
}

// Times from ±2^62 ns (146 years) on are no profiler's (and below it ts +
// dur stays in 64 bits): such a ts or dur is out of range, and its event is
// skipped and counted, as one with a negative dur is.
constexpr int64_t kMaxTimeNs = int64_t{1} << 62;

enum class Time { kOk, kNotANumber, kOutOfRange };

// The general case (an exponent, many digits) through double.
Time time_fallback(std::string_view s, int64_t* out) {
  double d = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec == std::errc::result_out_of_range) return Time::kOutOfRange;
  if (r.ec != std::errc()) return Time::kNotANumber;
  const double ns = d * 1000.0;
  if (!std::isfinite(ns) || std::fabs(ns) >= double(kMaxTimeNs)) return Time::kOutOfRange;
  *out = std::llround(ns);
  return Time::kOk;
}

// A JSON number (or a quoted one) of µs as ns, exact to the ns.
Time us_to_ns(std::string_view s, int64_t* out) {
  if (!s.empty() && s[0] == '"') s = s.substr(1, s.find('"', 1) - 1);
  size_t i = 0;
  const bool neg = i < s.size() && s[i] == '-';
  if (neg) ++i;
  const size_t int_start = i;
  uint64_t ip = 0;
  while (i < s.size() && is_digit(s[i]) && i - int_start < 16)
    ip = ip * 10 + uint64_t(s[i++] - '0');
  if (i == int_start) return Time::kNotANumber;
  uint64_t frac = 0;
  int fd = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      if (fd < 3)
        frac = frac * 10 + uint64_t(s[i] - '0');
      else if (fd == 3 && s[i] >= '5')
        frac += 1;  // round half up at the ns
      ++fd;
    }
  }
  if (i < s.size() && (is_digit(s[i]) || s[i] == 'e' || s[i] == 'E')) return time_fallback(s, out);
  for (; fd < 3; ++fd) frac *= 10;
  const uint64_t v = ip * 1000 + frac;  // < 10^19: no overflow in 64 bits
  if (v >= uint64_t(kMaxTimeNs)) return Time::kOutOfRange;
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return Time::kOk;
}

bool to_int(std::string_view s, int64_t* out) {
  if (!s.empty() && s[0] == '"') s = s.substr(1, s.find('"', 1) - 1);
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (r.ec == std::errc() &&
      (r.ptr == s.data() + s.size() || (*r.ptr != '.' && *r.ptr != 'e' && *r.ptr != 'E')))
    return true;
  return number_fallback(s, 1.0, out);
}

std::string_view token(ond::value& v) { return v.raw_json_token(); }

// A value that is not what JSON or the schema allows, at a byte offset.
struct BadValue {
  uint64_t offset;
  std::string what;
};

// ts/dur: a number of µs; one out of range marks the event (`bad_time`)
// to be skipped; anything else is not a trace event.
bool read_time(ond::value& v, const char* base, const char* field, int64_t* ns,
               const char** bad_time) {
  const std::string_view t = token(v);
  const Time r = us_to_ns(t, ns);
  if (r == Time::kOk) return true;
  if (r == Time::kOutOfRange) {
    *bad_time = field;
    return false;
  }
  throw BadValue{static_cast<uint64_t>(t.data() - base),
                 std::string("\"") + field + "\" is not a number of microseconds"};
}

// A trace event that is not an object must still be valid JSON.
void check_scalar(ond::value& v, const char* base) {
  const std::string_view t = token(v);
  bool ok = false;
  ond::json_type type;
  if (!v.type().get(type)) {
    switch (type) {
      case ond::json_type::number: {
        double d;
        ok = !v.get_double().get(d);
        break;
      }
      case ond::json_type::string: {
        std::string_view s;
        ok = !v.get_string().get(s);
        break;
      }
      case ond::json_type::boolean: {
        bool b;
        ok = !v.get_bool().get(b);
        break;
      }
      case ond::json_type::null: {
        bool n = false;
        ok = !v.is_null().get(n) && n;
        break;
      }
      default:
        ok = true;
        break;
    }
  }
  if (!ok) throw BadValue{static_cast<uint64_t>(t.data() - base), "not a JSON value"};
}

const char* raw_string(ond::value& v) {
  ond::raw_json_string r;
  if (v.get_raw_json_string().get(r)) return nullptr;  // not a string: treated as absent
  return r.raw();
}

void read_id(ond::value& v, Id& id) {
  std::string_view t = token(v);
  if (t.empty()) return;
  id.present = true;
  if (t[0] == '"') {
    const Raw r{raw_string(v)};
    id.str = r.view();
    id.is_string = true;
    // A numeric string ("123", as some writers quote tids) is a number.
    int64_t n = 0;
    const auto res = std::from_chars(id.str.data(), id.str.data() + id.str.size(), n);
    if (!id.str.empty() && res.ec == std::errc() && res.ptr == id.str.data() + id.str.size()) {
      id.is_string = false;
      id.num = n;
    }
    return;
  }
  if (!to_int(t, &id.num)) id.present = false;
}

void read_int(ond::value& v, int64_t* out) {
  int64_t n = 0;
  if (to_int(token(v), &n)) *out = n;
}

void parse_args(ond::value& v, RawArgs& a) {
  ond::object o;
  if (v.get_object().get(o)) return;  // not an object: no args
  for (auto f : o) {
    const char* k = ond::raw_json_string(f.key()).raw();
    ond::value val = f.value();
    switch (k[0]) {
      case 'b':
        if (key_is(k, "bytes")) read_int(val, &a.bytes);
        break;
      case 'I':
        if (key_is(k, "In msg nelems")) read_int(val, &a.in_nelems);
        break;
      case 'G':
        if (key_is(k, "Group size")) read_int(val, &a.group_size);
        break;
      case 'C':
        if (key_is(k, "Collective name")) a.collective.p = raw_string(val);
        break;
      case 'P':
        if (key_is(k, "Process Group Name")) {
          std::string_view t = token(val);
          while (!t.empty() &&
                 (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t'))
            t.remove_suffix(1);
          if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
          a.process_group = t;
        }
        break;
      case 'c':
        if (key_is(k, "correlation")) read_int(val, &a.correlation);
        break;
      case 's':
        if (key_is(k, "stream")) read_int(val, &a.stream);
        break;
      case 'd':
        if (key_is(k, "dtype"))
          a.dtype.p = raw_string(val);
        else if (key_is(k, "device"))
          read_int(val, &a.device);
        break;
      default:
        break;
    }
  }
}

// Host ops, annotations and Python frames need no args (and theirs are the
// largest: input shapes); the others' args hold bytes, stream, message size.
bool wants_args(const RawEvent& e) {
  if (!e.has_cat) return false;
  switch (e.cat) {
    case Cat::kKernel:
    case Cat::kMemcpy:
    case Cat::kMemset:
    case Cat::kRuntime:
    case Cat::kSync:
      return true;
    default:
      return false;
  }
}

void parse_event(ond::value v, const char* base, Mapper& m) {
  RawEvent e;
  e.offset = static_cast<uint64_t>(token(v).data() - base);
  ond::object obj;
  if (v.get_object().get(obj)) {
    check_scalar(v, base);
    e.ph = '?';
    m.add(e);
    return;
  }
  for (auto f : obj) {
    const char* k = ond::raw_json_string(f.key()).raw();
    ond::value val = f.value();
    switch (k[0]) {
      case 'p':
        if (key_is(k, "ph")) {
          const char* s = raw_string(val);
          e.ph = s != nullptr ? s[0] : '?';
        } else if (key_is(k, "pid")) {
          read_id(val, e.pid);
        }
        break;
      case 'c':
        if (key_is(k, "cat")) {
          const Raw r{raw_string(val)};
          if (r) {
            e.has_cat = true;
            e.cat = classify_cat(r.view(), &e.lower_cat);
          }
        }
        break;
      case 'n':
        if (key_is(k, "name")) e.name.p = raw_string(val);
        break;
      case 't':
        if (key_is(k, "ts"))
          e.has_ts = read_time(val, base, "ts", &e.ts_ns, &e.bad_time);
        else if (key_is(k, "tid"))
          read_id(val, e.tid);
        break;
      case 'd':
        if (key_is(k, "dur")) e.has_dur = read_time(val, base, "dur", &e.dur_ns, &e.bad_time);
        break;
      case 'a':
        if (key_is(k, "args")) {
          // Kineto writes cat before args; a writer that does not gets its args read in full.
          if (wants_args(e) || !e.has_cat) parse_args(val, e.args);
        }
        break;
      default:
        break;
    }
  }
  m.add(e);
}

void parse_events(ond::value arr, const char* base, Mapper& m, const std::string& name) {
  ond::array a;
  if (arr.get_array().get(a)) throw ImportError(name + ": \"traceEvents\" is not an array");
  for (auto ev : a) parse_event(ev.value(), base, m);
}

void parse_dist_info(ond::value v, ImportedRank& out) {
  ond::object o;
  if (v.get_object().get(o)) {
    out.warnings.push_back(out.file + ": distributedInfo is not an object: rank unknown");
    return;
  }
  for (auto f : o) {
    const char* k = ond::raw_json_string(f.key()).raw();
    ond::value val = f.value();
    if (key_is(k, "rank"))
      read_int(val, &out.rank);
    else if (key_is(k, "world_size"))
      read_int(val, &out.world_size);
  }
}

void parse_object(ond::document& doc, const char* base, Mapper& m, ImportedRank& out) {
  bool events = false;
  for (auto f : doc.get_object()) {
    const char* k = ond::raw_json_string(f.key()).raw();
    if (key_is(k, "traceEvents")) {
      parse_events(f.value(), base, m, out.file);
      events = true;
    } else if (key_is(k, "baseTimeNanoseconds")) {
      ond::value val = f.value();
      read_int(val, &out.base_time_ns);
    } else if (key_is(k, "distributedInfo")) {
      parse_dist_info(f.value(), out);
    }
  }
  if (!events)
    throw ImportError(out.file + ": JSON without \"traceEvents\": not a PyTorch profiler trace");
}

std::string where(ond::document& doc, const char* base, size_t size) {
  const char* at = nullptr;
  if (doc.current_location().get(at) || at == nullptr)
    return "at the end of the JSON (" + std::to_string(size) + " bytes)";
  return "near byte " + std::to_string(at - base);
}

}  // namespace

void parse_trace(const std::string& json, const std::string& name, Mapper& m, ImportedRank& out) {
  ond::parser parser;
  ond::document doc;
  const char* base = json.data();  // offsets in messages count from the file's first byte
  // A UTF-8 byte order mark (editors on Windows write one) is no JSON: skipped.
  const size_t bom = json.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  if (auto err = parser
                     .iterate(simdjson::padded_string_view(json.data() + bom, json.size() - bom,
                                                           json.capacity() - bom))
                     .get(doc))
    throw ImportError(
        name + ": malformed JSON" +
        (err == simdjson::UNCLOSED_STRING
             ? ": it ends at byte " + std::to_string(json.size()) + " inside a string (a cut file?)"
             : " (" + std::to_string(json.size()) + " bytes): " + simdjson::error_message(err)));
  try {
    ond::json_type t;
    if (doc.type().get(t)) throw ImportError(name + ": empty or not JSON");
    if (t == ond::json_type::array) {
      for (auto ev : doc.get_array()) parse_event(ev.value(), base, m);
    } else if (t == ond::json_type::object) {
      parse_object(doc, base, m, out);
    } else {
      throw ImportError(name + ": the JSON is neither an object nor an array of trace events");
    }
  } catch (const BadValue& b) {
    throw ImportError(name + ": malformed trace event at byte " + std::to_string(b.offset) + ": " +
                      b.what);
  } catch (const simdjson::simdjson_error& e) {
    if (e.error() == simdjson::INCOMPLETE_ARRAY_OR_OBJECT)
      throw ImportError(name + ": malformed JSON: it ends at byte " + std::to_string(json.size()) +
                        " inside an unclosed object or array (a cut file?)");
    throw ImportError(name + ": malformed JSON " + where(doc, base, json.size()) + ": " + e.what());
  }
}

}  // namespace stallscope::analyzer::kineto
