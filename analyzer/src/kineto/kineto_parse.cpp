// A batch of trace events through simdjson On-Demand (kineto_stream.cpp
// cuts the JSON into batches): keys compared on their raw bytes, numbers
// read from their text (ts in µs with up to three decimals becomes exact
// integer ns), strings left in place (Raw); invalid UTF-8 replaced.
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>

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
bool read_time(ond::value& v, const Where& w, const char* field, int64_t* ns,
               const char** bad_time) {
  const std::string_view t = token(v);
  const Time r = us_to_ns(t, ns);
  if (r == Time::kOk) return true;
  if (r == Time::kOutOfRange) {
    *bad_time = field;
    return false;
  }
  throw BadValue{w.at(t.data()), std::string("\"") + field + "\" is not a number of microseconds"};
}

// A trace event that is not an object must still be valid JSON.
void check_scalar(ond::value& v, const Where& w) {
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
  if (!ok) throw BadValue{w.at(t.data()), "not a JSON value"};
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

void parse_event(ond::value v, const Where& w, Mapper& m) {
  RawEvent e;
  e.offset = w.at(token(v).data());
  ond::object obj;
  if (v.get_object().get(obj)) {
    check_scalar(v, w);
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
          e.has_ts = read_time(val, w, "ts", &e.ts_ns, &e.bad_time);
        else if (key_is(k, "tid"))
          read_id(val, e.tid);
        break;
      case 'd':
        if (key_is(k, "dur")) e.has_dur = read_time(val, w, "dur", &e.dur_ns, &e.bad_time);
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

// The first ill-formed UTF-8 byte of s[from, ...) (Unicode's table 3-7), or npos.
size_t bad_utf8(std::string_view s, size_t i) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    const unsigned c = u[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      n = 1;
    else if (c >= 0xE0 && c <= 0xEF)
      n = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
      n = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
      return i;
    if (i + n >= s.size()) return i;
    if (u[i + 1] < lo || u[i + 1] > hi) return i;
    for (size_t k = 2; k <= n; ++k)
      if (u[i + k] < 0x80 || u[i + k] > 0xBF) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

// `doc` with each ill-formed byte replaced by U+FFFD (one per byte), and
// where the copy grew; counts them in `fixes`.
std::string repair_utf8(std::string_view doc, uint64_t origin,
                        std::vector<std::pair<size_t, size_t>>& grown, Utf8Fixes& fixes) {
  std::string out;
  out.reserve(doc.size() + 64 + simdjson::SIMDJSON_PADDING);
  size_t from = 0;
  for (size_t bad = bad_utf8(doc, 0); bad != std::string_view::npos; bad = bad_utf8(doc, from)) {
    out.append(doc, from, bad - from);
    out.append("\xEF\xBF\xBD");
    grown.emplace_back(out.size(), (grown.empty() ? 0 : grown.back().second) + 2);
    if (fixes.bytes++ == 0) fixes.first = origin + bad;
    from = bad + 1;
  }
  out.append(doc, from);
  out.reserve(out.size() + simdjson::SIMDJSON_PADDING);
  return out;
}

void parse_events(ond::document& doc, const Where& w, Mapper& m) {
  for (auto ev : doc.get_array()) parse_event(ev.value(), w, m);
}

[[noreturn]] void fail_at(const std::string& name, ond::document& doc, const Where& w,
                          const std::string& what) {
  const char* at = nullptr;
  if (doc.current_location().get(at) || at == nullptr)
    throw ImportError(name + ": malformed JSON in the trace events from byte " +
                      std::to_string(w.origin) + ": " + what);
  throw ImportError(name + ": malformed JSON near byte " + std::to_string(w.at(at)) + ": " + what);
}

}  // namespace

uint64_t Where::at(const char* p) const {
  size_t i = static_cast<size_t>(p - base);
  if (grown != nullptr && !grown->empty()) {
    // Offsets inside a replacement count as its first byte.
    auto it = std::upper_bound(grown->begin(), grown->end(), std::make_pair(i, SIZE_MAX));
    size_t added = it == grown->begin() ? 0 : std::prev(it)->second;
    if (it != grown->end() && i + 3 >= it->first) added = it->second - 2, i = it->first - 3;
    i -= added;
  }
  return origin + i;
}

bool parse_int(std::string_view text, int64_t* out) { return to_int(text, out); }

void parse_batch(ond::parser& parser, const char* doc, size_t len, uint64_t origin,
                 const std::string& name, Mapper& m, Utf8Fixes& fixes) {
  std::vector<std::pair<size_t, size_t>> grown;
  std::string repaired;
  Where w{doc, origin, nullptr};
  ond::document d;
  auto err =
      parser.iterate(simdjson::padded_string_view(doc, len, len + simdjson::SIMDJSON_PADDING))
          .get(d);
  if (err == simdjson::UTF8_ERROR) {
    // One name with a stray byte must not cost the file: U+FFFD, a warning.
    repaired = repair_utf8({doc, len}, origin, grown, fixes);
    w = Where{repaired.data(), origin, &grown};
    err = parser.iterate(simdjson::padded_string_view(repaired)).get(d);
  }
  if (err)
    throw ImportError(name + ": malformed JSON in the trace events from byte " +
                      std::to_string(origin) + ": " + simdjson::error_message(err));
  try {
    parse_events(d, w, m);
  } catch (const BadValue& b) {
    throw ImportError(name + ": malformed trace event at byte " + std::to_string(b.offset) + ": " +
                      b.what);
  } catch (const simdjson::simdjson_error& e) {
    fail_at(name, d, w, e.what());
  }
}

void parse_dist_info(ond::parser& parser, const char* doc, size_t len, uint64_t origin,
                     ImportedRank& out) {
  ond::document d;
  if (parser.iterate(simdjson::padded_string_view(doc, len, len + simdjson::SIMDJSON_PADDING))
          .get(d)) {
    out.warnings.push_back(out.file + ": distributedInfo (at byte " + std::to_string(origin + 1) +
                           ") is not valid JSON: rank unknown");
    return;
  }
  try {
    for (auto v : d.get_array()) {
      ond::object o;
      if (v.value().get_object().get(o)) {
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
  } catch (const simdjson::simdjson_error& e) {
    out.warnings.push_back(out.file + ": distributedInfo (at byte " + std::to_string(origin + 1) +
                           ") is not valid JSON: rank unknown");
  }
}

}  // namespace stallscope::analyzer::kineto
