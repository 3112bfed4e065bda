// Parsing and validation of the loader's knobs (variables and flags share
// one table, so a knob cannot be settable one way and not the other).
#include "stallscope/loader/config.hpp"

#include <errno.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace stallscope::loader {

namespace {

using Setter = bool (*)(Config&, std::string_view);

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

template <typename T>
bool set_uint(T& field, std::string_view v, uint64_t lo, uint64_t hi) {
  uint64_t n;
  if (!parse_u64(v, lo, hi, &n)) return false;
  field = static_cast<T>(n);
  return true;
}

bool set_bool(bool& field, std::string_view v) {
  if (v == "1" || v == "on" || v == "true" || v == "yes") return field = true, true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return field = false, true;
  return false;
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
  const char* name;     // flag --loader-<name>, variable STALLSCOPE_LOADER_<NAME>
  const char* accepts;  // shown in errors
  Setter set;
};

const Knob kKnobs[] = {
    {"workers", "an integer in [1, 256]",
     [](Config& c, std::string_view v) { return set_uint(c.workers, v, 1, 256); }},
    {"queue_depth", "an integer in [1, 4096]",
     [](Config& c, std::string_view v) { return set_uint(c.queue_depth, v, 1, 4096); }},
    {"prefetch", "an integer in [1, 1024]",
     [](Config& c, std::string_view v) { return set_uint(c.prefetch_batches, v, 1, 1024); }},
    {"batch_size", "an integer in [1, 1048576]",
     [](Config& c, std::string_view v) { return set_uint(c.batch_size, v, 1, 1u << 20); }},
    {"group_size", "an integer in [0, 1048576] (0 = auto)",
     [](Config& c, std::string_view v) { return set_uint(c.group_size, v, 0, 1u << 20); }},
    {"read_size", "a size in [4K, 1G], a multiple of 4096 (K/M/G suffixes)",
     [](Config& c, std::string_view v) {
       return set_uint(c.read_size, v, 4096, 1u << 30) && c.read_size % 4096 == 0;
     }},
    {"pread_threads", "an integer in [1, 256]",
     [](Config& c, std::string_view v) { return set_uint(c.pread_threads, v, 1, 256); }},
    {"direct", "auto, on or off",
     [](Config& c, std::string_view v) {
       if (v == "auto") return c.direct = Toggle::kAuto, true;
       bool b;
       if (!set_bool(b, v)) return false;
       c.direct = b ? Toggle::kOn : Toggle::kOff;
       return true;
     }},
    {"pinned", "on or off", [](Config& c, std::string_view v) { return set_bool(c.pinned, v); }},
    {"drop_last", "on or off",
     [](Config& c, std::string_view v) { return set_bool(c.drop_last, v); }},
    {"probe", "1 or 0", [](Config& c, std::string_view v) { return set_bool(c.probe, v); }},
    {"shuffle", "on or off", [](Config& c, std::string_view v) { return set_bool(c.shuffle, v); }},
    {"error_policy", "fail or skip",
     [](Config& c, std::string_view v) {
       if (v == "fail") return c.on_error = ErrorPolicy::kFail, true;
       if (v == "skip") return c.on_error = ErrorPolicy::kSkip, true;
       return false;
     }},
    {"backend", "uring, pread or auto",
     [](Config& c, std::string_view v) {
       if (v == "uring") return c.backend = Backend::kUring, true;
       if (v == "pread") return c.backend = Backend::kPread, true;
       if (v == "auto") return c.backend = Backend::kAuto, true;
       return false;
     }},
    {"device", "auto, emulated, cuda or none",
     [](Config& c, std::string_view v) {
       if (v == "auto") return c.device = DeviceKind::kAuto, true;
       if (v == "emulated") return c.device = DeviceKind::kEmulated, true;
       if (v == "cuda") return c.device = DeviceKind::kCuda, true;
       if (v == "none") return c.device = DeviceKind::kNone, true;
       return false;
     }},
    {"pinned_gbps", "a number of GB/s in (0.001, 10000)",
     [](Config& c, std::string_view v) { return set_gbps(c.pinned_gbps, v); }},
    {"pageable_gbps", "a number of GB/s in (0.001, 10000)",
     [](Config& c, std::string_view v) { return set_gbps(c.pageable_gbps, v); }},
    {"seed", "an unsigned integer",
     [](Config& c, std::string_view v) { return set_uint(c.seed, v, 0, UINT64_MAX); }},
    {"rank", "an integer in [0, 1048575]",
     [](Config& c, std::string_view v) { return set_uint(c.rank, v, 0, (1u << 20) - 1); }},
    {"world_size", "an integer in [1, 1048576]",
     [](Config& c, std::string_view v) { return set_uint(c.world_size, v, 1, 1u << 20); }},
};

std::string env_name(const Knob& k) {
  std::string s = "STALLSCOPE_LOADER_";
  for (const char* p = k.name; *p; ++p) s += static_cast<char>(std::toupper(*p));
  return s;
}

std::string flag_name(const Knob& k) {
  std::string s = "--loader-";
  for (const char* p = k.name; *p; ++p) s += *p == '_' ? '-' : *p;
  return s;
}

int refuse(std::string* error, const std::string& who, std::string_view value,
           const char* accepts) {
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
      if (v != nullptr && !k.set(cfg, v)) return refuse(error, var, v, k.accepts);
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
        if (!k.set(cfg, v)) return refuse(error, f.substr(0, f.size() - 1), v, k.accepts);
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
      if (name != k.name) continue;
      Config next = cfg;  // a setter may write before it refuses (read_size)
      if (k.set(next, value)) return cfg = next, 0;
      if (error) *error = std::string("not ") + k.accepts;
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
