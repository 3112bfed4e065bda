// The JSON of a trace as a stream: a window of bounded size slides over it,
// a small scanner follows its structure (strings, brackets, the top-level
// keys), and the trace events are cut into batches that simdjson parses in
// place (kineto_parse.cpp). What a file costs is the window, one batch's
// simdjson index and the mapped events, never its text (RELIABILITY.md
// case 46).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "kineto/kineto_internal.hpp"

namespace stallscope::analyzer::kineto {

namespace {

// Nesting has no bound but the window's (a bit a level); where brackets
// opened is kept for the first kTrackedDepth levels, for messages.
constexpr size_t kTrackedDepth = 1024;
constexpr size_t kNone = SIZE_MAX;
constexpr size_t kPad = simdjson::SIMDJSON_PADDING;

bool is_space(int c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Bytes the scanner stops at inside an array or object.
struct Stops {
  bool at[256] = {};
  constexpr Stops() {
    for (unsigned char c : {'"', '[', ']', '{', '}'}) at[c] = true;
  }
};
constexpr Stops kStops;

std::string size_text(size_t n) {
  return n >= (size_t{1} << 20) ? std::to_string(n >> 20) + " MiB" : std::to_string(n) + " bytes";
}

bool is_scalar_start(int c) {
  return (c >= '0' && c <= '9') || c == '-' || c == 't' || c == 'f' || c == 'n';
}

std::string shown(int c) {
  char b[16];
  std::snprintf(b, sizeof b, c > 0x20 && c < 0x7f ? "'%c'" : "byte 0x%02x", c);
  return b;
}

// Where JSON's grammar first breaks in `s`, which holds trace events after
// the '[' (`first`) or a ',' of the array: its offset and what was
// expected; npos when nothing breaks before the end of `s` or the array.
// Only when the scanner failed: it follows strings and brackets alone, and
// after a lost quote it fails only at the end of the file.
std::pair<size_t, std::string> first_break(std::string_view s, bool first) {
  enum Want { kValue, kValueOrClose, kKey, kKeyOrClose, kColon, kNext };
  std::string open = "[";
  Want want = first ? kValueOrClose : kValue;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (is_space(c)) {
      ++i;
      continue;
    }
    const size_t at = i;
    bool value = false;
    if (want == kColon) {
      if (c != ':') return {at, "expected ':' after a key, found " + shown(c)};
      want = kValue, ++i;
      continue;
    }
    if (c == '"' && want != kNext) {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
      if (i >= s.size()) return {std::string_view::npos, ""};
      ++i;
      if (want == kKey || want == kKeyOrClose) {
        want = kColon;
        continue;
      }
      value = true;
    } else if ((c == '}' || c == ']') && (want == kNext || (want == kValueOrClose && c == ']') ||
                                          (want == kKeyOrClose && c == '}'))) {
      if ((c == '}') != (open.back() == '{'))
        return {at, shown(c) + " closes an " + (open.back() == '{' ? "object" : "array")};
      open.pop_back(), ++i;
      if (open.empty()) return {std::string_view::npos, ""};
      value = true;
    } else if (want == kNext) {
      if (c != ',')
        return {at, std::string("expected ',' or '") + (open.back() == '{' ? '}' : ']') +
                        "' after a value, found " + shown(c)};
      want = open.back() == '{' ? kKey : kValue, ++i;
      continue;
    } else if (want == kKey || want == kKeyOrClose) {
      return {at, "expected a key, found " + shown(c)};
    } else if (c == '{' || c == '[') {
      open.push_back(char(c)), ++i;
      want = c == '{' ? kKeyOrClose : kValueOrClose;
      continue;
    } else if (is_scalar_start(c)) {
      while (i < s.size() && !is_space(s[i]) && s[i] != ',' && s[i] != ']' && s[i] != '}' &&
             s[i] != ':' && s[i] != '"' && s[i] != '[' && s[i] != '{')
        ++i;
      value = true;
    } else {
      return {at, "expected a value, found " + shown(c)};
    }
    if (value) want = kNext;
  }
  return {std::string_view::npos, ""};
}

class Walker {
 public:
  Walker(Source& src, const std::string& name, Mapper& m, ImportedRank& out, Window w)
      : src_(src),
        name_(name),
        m_(m),
        out_(out),
        buf_(new char[w.first + kPad]),
        cap_(w.first),
        max_(std::max(w.max, w.first)) {}
  void run();

 private:
  void compact();
  bool more();
  void make_room();
  int next_token();
  uint64_t offset() const { return base_ + pos_; }
  [[noreturn]] void fail(const std::string& what);
  [[noreturn]] void fail_end();
  void parse_pending();
  void check_window();
  void open(char c);
  void close();
  void skip_value();
  void skip_string();
  void skip_scalar();
  std::string take_value();
  void object();
  void events();
  void flush(size_t sep);

  Source& src_;
  const std::string& name_;
  Mapper& m_;
  ImportedRank& out_;
  std::unique_ptr<char[]> buf_;  // cap_ bytes and simdjson's padding
  size_t cap_, max_;
  size_t pos_ = 0, end_ = 0;  // the scanner's byte; the end of what was read
  size_t keep_ = kNone;       // the first byte still needed (a batch, a value), or none
  uint64_t base_ = 0;         // offset of buf_[0] in the JSON
  bool eof_ = false;
  bool in_events_ = false;         // keep_ is a batch: '[' or the separator before its first event
  size_t last_sep_ = kNone;        // the separator after the batch's last complete event
  bool oversize_ = false;          // the event being scanned passed max_: dropped
  uint64_t event_at_ = 0;          // its offset
  std::vector<bool> open_;         // brackets open: true for '{'
  std::vector<uint64_t> open_at_;  // where, for the first kTrackedDepth
  bool in_string_ = false;
  uint64_t string_at_ = 0;
  simdjson::ondemand::parser parser_;
  Utf8Fixes fixes_;
};

// Moves what is still needed to the front of the window.
void Walker::compact() {
  const size_t from = keep_ == kNone ? pos_ : keep_;
  if (from == 0) return;
  std::memmove(buf_.get(), buf_.get() + from, end_ - from);
  base_ += from;
  end_ -= from;
  pos_ -= from;
  if (keep_ != kNone) keep_ -= from;
  if (last_sep_ != kNone) last_sep_ = last_sep_ >= from ? last_sep_ - from : kNone;
}

// Called with pos_ == end_: reads more. False at the end of the JSON.
bool Walker::more() {
  if (eof_) return false;
  compact();
  if (end_ == cap_) {
    make_room();
    compact();
  }
  const size_t n = src_.read(buf_.get() + end_, cap_ - end_);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += n;
  return true;
}

// The window is full of bytes still needed: parse the complete events of
// the batch, or grow for one large event or value.
void Walker::make_room() {
  if (in_events_ && last_sep_ != kNone && last_sep_ > keep_) {
    flush(last_sep_);
    keep_ = last_sep_;
    return;
  }
  if (cap_ >= max_) {
    if (!in_events_ || oversize_) fail("a value of more than " + size_text(max_));
    // One event past the bound: dropped and counted; the scan goes on,
    // unless JSON broke in it.
    check_window();
    oversize_ = true;
    keep_ = last_sep_ = kNone;
    return;
  }
  const size_t cap = std::min(cap_ * 2, max_);
  std::unique_ptr<char[]> bigger(new char[cap + kPad]);
  std::memcpy(bigger.get(), buf_.get(), end_);
  buf_ = std::move(bigger);
  cap_ = cap;
}

// Parses the batch from keep_ ('[' or the separator before its first event)
// to `sep` (the separator after its last), both made brackets.
void Walker::flush(size_t sep) {
  char* doc = buf_.get() + keep_;
  doc[0] = '[';
  buf_[sep] = ']';
  parse_batch(parser_, doc, sep - keep_ + 1, base_ + keep_, name_, m_, fixes_);
}

// Skips whitespace; the byte there, or -1 at the end.
int Walker::next_token() {
  for (;;) {
    if (pos_ == end_ && !more()) return -1;
    const unsigned char c = static_cast<unsigned char>(buf_[pos_]);
    if (!is_space(c)) return c;
    ++pos_;
  }
}

// Before a structural error is reported: the complete events before it go
// through simdjson, whose error, where there is one, is the earlier (a
// quote lost mid-file pairs the scanner's quotes wrongly from there on).
void Walker::parse_pending() {
  check_window();
  if (!in_events_ || last_sep_ == kNone || last_sep_ <= keep_) return;
  const size_t sep = last_sep_;
  last_sep_ = kNone;
  flush(sep);
}

// The trace events in the window since the last batch, checked for where
// JSON breaks first (a lost quote: the scanner's own error comes later).
void Walker::check_window() {
  if (!in_events_ || keep_ == kNone) return;
  const auto [at, what] =
      first_break({buf_.get() + keep_ + 1, end_ - keep_ - 1}, buf_[keep_] == '[');
  if (at == std::string_view::npos) return;
  in_events_ = false;
  throw ImportError(name_ + ": malformed JSON at byte " + std::to_string(base_ + keep_ + 1 + at) +
                    ": " + what);
}

void Walker::fail(const std::string& what) {
  parse_pending();
  throw ImportError(name_ + ": malformed JSON at byte " + std::to_string(offset()) + ": " + what);
}

void Walker::fail_end() {
  parse_pending();
  const uint64_t size = base_ + end_;
  if (in_string_)
    throw ImportError(name_ + ": malformed JSON: it ends at byte " + std::to_string(size) +
                      " inside a string (opened at byte " + std::to_string(string_at_) +
                      "; a cut file?)");
  throw ImportError(name_ + ": malformed JSON: it ends at byte " + std::to_string(size) +
                    " inside an unclosed object or array" +
                    (open_at_.empty()
                         ? std::string()
                         : " (opened at byte " + std::to_string(open_at_.back()) + ")") +
                    " (a cut file?)");
}

void Walker::open(char c) {
  if (open_.size() < kTrackedDepth) open_at_.push_back(offset());
  open_.push_back(c == '{');
  ++pos_;
}

void Walker::close() {
  const char c = buf_[pos_];
  const bool object = open_.back();
  if ((c == '}') != object)
    fail(std::string("'") + c + "' closes an " + (object ? "object" : "array") +
         (open_.size() <= kTrackedDepth ? " opened at byte " + std::to_string(open_at_.back())
                                        : std::string()));
  if (open_.size() <= kTrackedDepth) open_at_.pop_back();
  open_.pop_back();
  ++pos_;
}

void Walker::skip_string() {
  in_string_ = true;
  string_at_ = offset();
  ++pos_;
  for (;;) {
    if (pos_ == end_ && !more()) fail_end();
    const char* p = buf_.get() + pos_;
    const size_t n = end_ - pos_;
    const auto* q = static_cast<const char*>(std::memchr(p, '"', n));
    const auto* b = static_cast<const char*>(std::memchr(p, '\\', q != nullptr ? q - p : n));
    if (b != nullptr) {  // an escape: skip the byte after the backslash
      pos_ += static_cast<size_t>(b - p) + 1;
      if (pos_ == end_ && !more()) fail_end();
      ++pos_;
    } else if (q != nullptr) {
      pos_ += static_cast<size_t>(q - p) + 1;
      in_string_ = false;
      return;
    } else {
      pos_ = end_;
    }
  }
}

// A number, true, false or null: up to the next delimiter (simdjson checks
// the ones it reads).
void Walker::skip_scalar() {
  for (;;) {
    if (pos_ == end_ && !more()) return;
    const char c = buf_[pos_];
    if (is_space(c) || c == ',' || c == ']' || c == '}' || c == ':') return;
    if (c == '"' || c == '[' || c == '{') fail("expected ',' or the end of an object or array");
    ++pos_;
  }
}

void Walker::skip_value() {
  const int c = next_token();
  if (c == -1) fail_end();
  if (c == '"') return skip_string();
  if (c != '{' && c != '[') {
    if (!is_scalar_start(c)) fail("expected a value, found " + shown(c));
    return skip_scalar();
  }
  const size_t depth = open_.size();
  open(char(c));
  while (open_.size() > depth) {
    if (pos_ == end_ && !more()) fail_end();
    const char* p = buf_.get() + pos_;
    const char* e = buf_.get() + end_;
    while (p < e && !kStops.at[static_cast<unsigned char>(*p)]) ++p;
    pos_ = static_cast<size_t>(p - buf_.get());
    if (p == e) continue;
    if (*p == '"')
      skip_string();
    else if (*p == '{' || *p == '[')
      open(*p);
    else
      close();
  }
}

// The text of the value at pos_ (a top-level value the importer reads).
std::string Walker::take_value() {
  next_token();
  keep_ = pos_;
  skip_value();
  std::string v(buf_.get() + keep_, pos_ - keep_);
  keep_ = kNone;
  return v;
}

// The trace events: the array at pos_, cut into batches.
void Walker::events() {
  open('[');
  keep_ = pos_ - 1;
  last_sep_ = kNone;
  in_events_ = true;
  int c = next_token();
  while (c != ']') {
    event_at_ = offset();
    skip_value();
    c = next_token();
    if (c != ',' && c != ']') {
      if (c == -1) fail_end();
      fail("expected ',' or ']' after a trace event");
    }
    if (oversize_) {
      const std::string why = "an event of more than " + size_text(max_);
      m_.add_skipped(event_at_, why.c_str());
      oversize_ = false;
      keep_ = pos_;  // the next batch starts at this separator
    } else {
      last_sep_ = pos_;
    }
    if (c == ',') {
      ++pos_;
      if ((c = next_token()) == ']') fail("expected a trace event after ','");
    }
  }
  if (last_sep_ != kNone && last_sep_ > keep_) flush(last_sep_);
  keep_ = last_sep_ = kNone;
  in_events_ = false;
  close();
}

// The top-level object: traceEvents, and what else the importer reads.
void Walker::object() {
  open('{');
  bool events_seen = false;
  int c = next_token();
  while (c != '}') {
    if (c == -1) fail_end();
    if (c != '"') fail("expected a key");
    std::string key = take_value();
    if (next_token() != ':') pos_ == end_ ? fail_end() : fail("expected ':' after a key");
    ++pos_;
    c = next_token();
    if (c == -1) fail_end();
    if (key == "\"traceEvents\"") {
      if (c != '[') throw ImportError(name_ + ": \"traceEvents\" is not an array");
      events();
      events_seen = true;
    } else if (key == "\"baseTimeNanoseconds\"") {
      parse_int(take_value(), &out_.base_time_ns);
    } else if (key == "\"distributedInfo\"") {
      const uint64_t at = offset();
      const std::string value = take_value();
      std::string doc;
      doc.reserve(value.size() + 2 + kPad);
      doc.append(1, '[').append(value).append(1, ']');
      parse_dist_info(parser_, doc.data(), doc.size(), at - 1, out_);
    } else {
      skip_value();
    }
    c = next_token();
    if (c == ',') {
      ++pos_;
      c = next_token();
      if (c == '}') fail("expected a key after ','");
    } else if (c != '}') {
      if (c == -1) fail_end();
      fail("expected ',' or '}' after a value");
    }
  }
  close();
  if (!events_seen)
    throw ImportError(name_ + ": JSON without \"traceEvents\": not a PyTorch profiler trace");
}

void Walker::run() {
  // A UTF-8 byte order mark (editors on Windows write one) is no JSON: skipped.
  if (more() && end_ >= 3 && std::memcmp(buf_.get(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
  const int c = next_token();
  if (c == -1) throw ImportError(name_ + ": empty or not JSON");
  if (c == '[')
    events();
  else if (c == '{')
    object();
  else
    throw ImportError(name_ + ": the JSON is neither an object nor an array of trace events");
  if (next_token() != -1) fail("more after the end of the JSON");
  out_.json_bytes = base_ + end_;
  if (fixes_.bytes > 0)
    out_.warnings.push_back(name_ + ": " + std::to_string(fixes_.bytes) +
                            " byte(s) of invalid UTF-8 replaced by U+FFFD; the first at byte " +
                            std::to_string(fixes_.first));
}

}  // namespace

void parse_trace(Source& src, const std::string& name, Mapper& m, ImportedRank& out,
                 Window window) {
  Walker(src, name, m, out, window).run();
}

}  // namespace stallscope::analyzer::kineto
