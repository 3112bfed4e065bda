// The configuration table and its parsers. Everything but markdown_table()
// is allocation-free (the preload shim parses in its constructor).
#include "stallscope/internal/config.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "stallscope/internal/env_integer.hpp"

namespace stallscope::config {

namespace {

constexpr Var kTable[] = {
#define STALLSCOPE_CONFIG_ROW(id, name, type, lo, hi, unit, words, dflt, readers, doc) \
  {Id::id, name, Type::type, lo, hi, unit, words, dflt, readers, doc},
    STALLSCOPE_CONFIG_VARS(STALLSCOPE_CONFIG_ROW)
#undef STALLSCOPE_CONFIG_ROW
};

constexpr bool ids_are_positions() {
  for (size_t i = 0; i < std::size(kTable); ++i)
    if (static_cast<size_t>(kTable[i].id) != i) return false;
  return true;
}
static_assert(ids_are_positions());

// The value as shown in a message: at most 160 bytes, control bytes as '?'.
void shown(const char* text, char* out, size_t n) noexcept {
  size_t k = 0;
  for (; text[k] != '\0' && k + 1 < n && k < 160; ++k) {
    const auto c = static_cast<unsigned char>(text[k]);
    out[k] = c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  out[k] = '\0';
}

// "NAME='value': <problem> (<expected>); using the default <dflt>".
void say(const Var& v, const char* text, const char* problem, const char* expected, char* why,
         size_t n) noexcept {
  if (why == nullptr || n == 0) return;
  char value[168];
  shown(text, value, sizeof value);
  const char* dflt = *v.dflt != '\0' ? v.dflt : "";
  std::snprintf(why, n, "%s='%s': %s%s%s%s; using the default%s%s", v.name, value, problem,
                *expected != '\0' ? " (" : "", expected, *expected != '\0' ? ")" : "",
                *dflt != '\0' ? " " : "", dflt);
}

bool unset(const char* text) noexcept { return text == nullptr || *text == '\0'; }

// Whether `text` is all decimal digits with at most a leading '-'.
bool is_number(const char* text) noexcept {
  const char* p = *text == '-' ? text + 1 : text;
  if (*p == '\0') return false;
  for (; *p != '\0'; ++p)
    if (*p < '0' || *p > '9') return false;
  return true;
}

}  // namespace

std::span<const Var> table() noexcept { return kTable; }

const Var& var(Id id) noexcept { return kTable[static_cast<size_t>(id)]; }

const Var* find(std::string_view name) noexcept {
  for (const Var& v : kTable)
    if (name == v.name) return &v;
  return nullptr;
}

Read read_integer(const Var& v, const char* text, int64_t* out, char* why, size_t n) noexcept {
  if (unset(text)) return Read::kUnset;
  if (parse_env_integer(text, v.lo, v.hi, out)) return Read::kOk;
  char expected[96];
  std::snprintf(expected, sizeof expected, "expected %lld..%lld%s%s", static_cast<long long>(v.lo),
                static_cast<long long>(v.hi), *v.unit != '\0' ? " " : "", v.unit);
  say(v, text, is_number(text) ? "out of range" : "not a number", expected, why, n);
  return Read::kBad;
}

Read read_switch(const Var& v, const char* text, bool* out, char* why, size_t n) noexcept {
  if (unset(text)) return Read::kUnset;
  const std::string_view s(text);
  if (s == "on" || s == "1" || s == "true") return *out = true, Read::kOk;
  if (s == "off" || s == "0" || s == "false") return *out = false, Read::kOk;
  say(v, text, "not on or off", "expected on, off, 1, 0, true, false", why, n);
  return Read::kBad;
}

Read read_word(const Var& v, const char* text, int* index, char* why, size_t n) noexcept {
  if (unset(text)) return Read::kUnset;
  const std::string_view s(text);
  std::string_view words(v.words);
  for (int i = 0; !words.empty(); ++i) {
    const size_t bar = words.find('|');
    if (words.substr(0, bar) == s) return *index = i, Read::kOk;
    words = bar == std::string_view::npos ? std::string_view() : words.substr(bar + 1);
  }
  char problem[96] = "not one of ";
  size_t k = std::strlen(problem);
  for (const char* w = v.words; *w != '\0' && k + 3 < sizeof problem; ++w) {
    if (*w == '|') {
      problem[k++] = ',';
      problem[k++] = ' ';
    } else {
      problem[k++] = *w;
    }
  }
  problem[k] = '\0';
  say(v, text, problem, "", why, n);
  return Read::kBad;
}

int64_t default_integer(const Var& v) noexcept {
  int64_t d = 0;
  (void)parse_env_integer(v.dflt, INT64_MIN, INT64_MAX, &d);
  return d;
}

bool default_switch(const Var& v) noexcept { return std::strcmp(v.dflt, "on") == 0; }

int default_word(const Var& v) noexcept {
  int i = 0;
  (void)read_word(v, v.dflt, &i, nullptr, 0);
  return i;
}

int64_t env_integer(Id id, char* why, size_t n) noexcept {
  if (why != nullptr && n > 0) *why = '\0';
  const Var& v = var(id);
  int64_t x = 0;
  return read_integer(v, std::getenv(v.name), &x, why, n) == Read::kOk ? x : default_integer(v);
}

bool env_switch(Id id, char* why, size_t n) noexcept {
  if (why != nullptr && n > 0) *why = '\0';
  const Var& v = var(id);
  bool b = false;
  return read_switch(v, std::getenv(v.name), &b, why, n) == Read::kOk ? b : default_switch(v);
}

int env_word(Id id, char* why, size_t n) noexcept {
  if (why != nullptr && n > 0) *why = '\0';
  const Var& v = var(id);
  int i = 0;
  return read_word(v, std::getenv(v.name), &i, why, n) == Read::kOk ? i : default_word(v);
}

bool quiet() noexcept {
  static const bool q = env_switch(Id::kQuiet, nullptr, 0);
  return q;
}

}  // namespace stallscope::config
