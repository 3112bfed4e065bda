// Parsing and validation of the loader's knobs. Their names, ranges and
// choices are the rows of the configuration table (internal/config.hpp);
// variables and flags share them, so a knob cannot be settable one way and
// not the other.
#include "stallscope/loader/config.hpp"

#include <errno.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "stallscope/internal/config.hpp"

namespace stallscope::loader {

namespace {

using config::Id;
using config::Var;

// A setter parses one value into the config; the row gives its range or
// choices, so the table in internal/ is the one place they are written.
using Setter = bool (*)(Config&, std::string_view, const Var&);

bool parse_u64(std::string_view v, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (v.empty() || v.size() > 20) return false;
  uint64_t mult = 1;
  const char last = v.back();
  if (last == 'k' || last == 'K') mult = 1u << 10;
  if (last == 'm' || last == 'M') mult = 1u << 20;
  if (last == 'g' || last == 'G') mult = 1u << 30;
  if (mult != 1) v.remove_suffix(1);
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v.empty() || n > hi / mult || n * mult < lo) return false;
  *out = n * mult;
  return true;
}

// An integer in the row's [lo, hi] (K/M/G suffixes allowed).
template <typename T>
bool set_uint(T& field, std::string_view v, const Var& row) {
  uint64_t n;
  if (!parse_u64(v, static_cast<uint64_t>(row.lo), static_cast<uint64_t>(row.hi), &n)) return false;
  field = static_cast<T>(n);
  return true;
}

// The position of v among the row's words ("a|b|c"), or -1.
int word_index(std::string_view v, const Var& row) {
  std::string_view words = row.words;
  for (int i = 0; !words.empty(); ++i) {
    const size_t bar = words.find('|');
    if (words.substr(0, bar) == v) return i;
    if (bar == std::string_view::npos) break;
    words.remove_prefix(bar + 1);
  }
  return -1;
}

// A switch row's words are "on|off" (or "1|0"); the usual spellings of
// both are accepted.
bool set_bool(bool& field, std::string_view v, const Var&) {
  if (v == "1" || v == "on" || v == "true" || v == "yes") return field = true, true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return field = false, true;
  return false;
}

template <typename E>
bool set_word(E& field, std::string_view v, const Var& row, std::initializer_list<E> values) {
  const int i = word_index(v, row);
  if (i < 0 || static_cast<size_t>(i) >= values.size()) return false;
  field = values.begin()[i];
  return true;
}

bool set_gbps(double& field, std::string_view v) {
  const std::string s(v);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(d > 0.001 && d < 10000)) return false;
  field = d;
  return true;
}

struct Knob {
  Id id;         // its row: STALLSCOPE_LOADER_<NAME>, flag --loader-<name>
  Setter set;
  const char* accepts = nullptr;  // for rows whose range the table cannot hold
};

// Every loader row of the configuration table (Type::kKnob), with its parser.
const Knob kKnobs[] = {
    {Id::kLoaderWorkers, [](Config& c, std::string_view v, const Var& r) { return set_uint(c.workers, v, r); }},
    {Id::kLoaderQueueDepth,
     [](Config& c, std::string_view v, const Var& r) { return set_uint(c.queue_depth, v, r); }},
    {Id::kLoaderPrefetch,
     [](Config& c, std::string_view v, const Var& r) { return set_uint(c.prefetch_batches, v, r); }},
    {Id::kLoaderBatchSize,
     [](Config& c, std::string_view v, const Var& r) { return set_uint(c.batch_size, v, r); }},
    {Id::kLoaderGroupSize,
     [](Config& c, std::string_view v, const Var& r) { return set_uint(c.group_size, v, r); }},
    {Id::kLoaderReadSize,
     [](Config& c, std::string_view v, const Var& r) {
       return set_uint(c.read_size, v, r) && c.read_size % 4096 == 0;
     },
     "a size in [4K, 1G], a multiple of 4096 (K/M/G suffixes)"},
    {Id::kLoaderPreadThreads,
     [](Config& c, std::string_view v, const Var& r) { return set_uint(c.pread_threads, v, r); }},
    {Id::kLoaderDirect,
     [](Config& c, std::string_view v, const Var& r) {
       if (v == "auto") return c.direct = Toggle::kAuto, true;
       bool b;
       if (!set_bool(b, v, r)) return false;
       c.direct = b ? Toggle::kOn : Toggle::kOff;
       return true;
     }},
    {Id::kLoaderPinned, [](Config& c, std::string_view v, const Var& r) { return set_bool(c.pinned, v, r); }},
    {Id::kLoaderHugePages,
     [](Config& c, std::string_view v, const Var& r) { return set_bool(c.huge_pages, v, r); }},
    {Id::kLoaderDropLast,
     [](Config& c, std::string_view v, const Var& r) { return set_bool(c.drop_last, v, r); }},
    {Id::kLoaderProbe, [](Config& c, std::string_view v, const Var& r) { return set_bool(c.probe, v, r); }},
    {Id::kLoaderShuffle, [](Config& c, std::string_view v, const Var& r) { return set_bool(c.shuffle, v, r); }},
    {Id::kLoaderErrorPolicy,
     [](Config& c, std::string_view v, const Var& r) {
       return set_word(c.on_error, v, r, {ErrorPolicy::kFail, ErrorPolicy::kSkip});
     }},
    {Id::kLoaderBackend,
     [](Config& c, std::string_view v, const Var& r) {
       return set_word(c.backend, v, r, {Backend::kUring, Backend::kPread, Backend::kAuto});
     }},
    {Id::kLoaderDevice,
     [](Config& c, std::string_view v, const Var& r) {
       return set_word(c.device, v, r,
                       {DeviceKind::kAuto, DeviceKind::kEmulated, DeviceKind::kCuda, DeviceKind::kNone});
     }},
    {Id::kLoaderPinnedGbps, [](Config& c, std::string_view v, const Var&) { return set_gbps(c.pinned_gbps, v); },
     "a number of GB/s in (0.001, 10000)"},
    {Id::kLoaderPageableGbps,
     [](Config& c, std::string_view v, const Var&) { return set_gbps(c.pageable_gbps, v); },
     "a number of GB/s in (0.001, 10000)"},
    {Id::kLoaderSeed,
     [](Config& c, std::string_view v, const Var&) {
       uint64_t n;
       return parse_u64(v, 0, UINT64_MAX, &n) ? (c.seed = n, true) : false;
     },
     "an unsigned integer"},
    {Id::kLoaderRank, [](Config& c, std::string_view v, const Var& r) { return set_uint(c.rank, v, r); }},
    {Id::kLoaderWorldSize,
     [](Config& c, std::string_view v, const Var& r) { return set_uint(c.world_size, v, r); }},
};

constexpr std::string_view kEnvPrefix = "STALLSCOPE_LOADER_";

const Var& row(const Knob& k) { return config::var(k.id); }

// "workers" for STALLSCOPE_LOADER_WORKERS.
std::string knob_name(const Knob& k) {
  std::string s(std::string_view(row(k).name).substr(kEnvPrefix.size()));
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string env_name(const Knob& k) { return row(k).name; }

std::string flag_name(const Knob& k) {
  std::string s = "--loader-" + knob_name(k);
  for (size_t i = 9; i < s.size(); ++i)
    if (s[i] == '_') s[i] = '-';
  return s;
}

// What the knob accepts, for errors: "an integer in [1, 256]", "auto, on or off".
std::string accepts(const Knob& k) {
  if (k.accepts != nullptr) return k.accepts;
  const Var& r = row(k);
  if (r.words[0] == '\0')
    return "an integer in [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]";
  std::string words = r.words, out;
  size_t count = 1 + static_cast<size_t>(std::count(words.begin(), words.end(), '|'));
  size_t n = 0, from = 0;
  while (from <= words.size()) {
    const size_t bar = std::min(words.find('|', from), words.size());
    out += (n == 0 ? "" : n + 1 == count ? " or " : ", ") + words.substr(from, bar - from);
    ++n;
    from = bar + 1;
  }
  return out;
}

int refuse(std::string* error, const std::string& who, std::string_view value,
           const std::string& accepts) {
  if (error) *error = who + "='" + std::string(value) + "' is not " + accepts;
  return -EINVAL;
}

const char* real_getenv(const char* name) { return std::getenv(name); }

}  // namespace

int apply_env(Config& cfg, std::string* error) noexcept { return apply_env(cfg, real_getenv, error); }

int apply_env(Config& cfg, const char* (*get)(const char*), std::string* error) noexcept {
  try {
    for (const Knob& k : kKnobs) {
      const std::string var = env_name(k);
      const char* v = get(var.c_str());
      if (v != nullptr && !k.set(cfg, v, row(k))) return refuse(error, var, v, accepts(k));
    }
  } catch (...) {
    return -ENOMEM;
  }
  return 0;
}

int apply_flags(Config& cfg, const std::vector<std::string>& args, std::string* error,
                std::vector<std::string>* rest) noexcept {
  try {
    for (const std::string& a : args) {
      bool used = false;
      for (const Knob& k : kKnobs) {
        const std::string f = flag_name(k) + "=";
        if (a.rfind(f, 0) != 0) continue;
        const std::string_view v = std::string_view(a).substr(f.size());
        if (!k.set(cfg, v, row(k))) return refuse(error, f.substr(0, f.size() - 1), v, accepts(k));
        used = true;
      }
      if (!used && a.rfind("--loader-", 0) == 0) {
        if (error) *error = "unknown loader flag '" + a + "'";
        return -EINVAL;
      }
      if (!used && rest) rest->push_back(a);
    }
  } catch (...) {
    return -ENOMEM;
  }
  return 0;
}

int set_knob(Config& cfg, std::string_view name, std::string_view value,
             std::string* error) noexcept {
  try {
    for (const Knob& k : kKnobs) {
      if (name != knob_name(k)) continue;
      Config next = cfg;  // a setter may write before it refuses (read_size)
      if (k.set(next, value, row(k))) return cfg = next, 0;
      if (error) *error = "not " + accepts(k);
      return -EINVAL;
    }
    if (error) *error = "no such knob";
  } catch (...) {
    return -ENOMEM;
  }
  return -ENOENT;
}

int validate(const Config& cfg, std::string* error) noexcept {
  auto bad = [&](const char* what) {
    if (error) *error = what;
    return -EINVAL;
  };
  if (cfg.rank >= cfg.world_size)
    return bad("STALLSCOPE_LOADER_RANK must be below STALLSCOPE_LOADER_WORLD_SIZE");
  if (cfg.read_size % 4096 != 0 || cfg.read_size < 4096)
    return bad("STALLSCOPE_LOADER_READ_SIZE must be a multiple of 4096");
  if (cfg.workers == 0 || cfg.queue_depth == 0 || cfg.prefetch_batches == 0 ||
      cfg.batch_size == 0 || cfg.pread_threads == 0)
    return bad("STALLSCOPE_LOADER_WORKERS, _QUEUE_DEPTH, _PREFETCH, _BATCH_SIZE and "
               "_PREAD_THREADS must be at least 1");
  if (!(cfg.pinned_gbps > 0) || !(cfg.pageable_gbps > 0))
    return bad("STALLSCOPE_LOADER_PINNED_GBPS and _PAGEABLE_GBPS must be positive");
  return 0;
}

std::string_view backend_name(Backend b) noexcept {
  switch (b) {
    case Backend::kUring: return "uring";
    case Backend::kPread: return "pread";
    default: return "auto";
  }
}

std::string_view device_kind_name(DeviceKind d) noexcept {
  switch (d) {
    case DeviceKind::kEmulated: return "emulated";
    case DeviceKind::kCuda: return "cuda";
    case DeviceKind::kNone: return "none";
    default: return "auto";
  }
}

}  // namespace stallscope::loader
