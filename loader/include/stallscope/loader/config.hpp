// stallscope loader — configuration.
//
// One validated, immutable set of knobs for a Loader. Start from the
// defaults, then apply STALLSCOPE_LOADER_* variables and/or --loader-* flags;
// every bad value is refused with a message naming the variable or flag.
//
//   stallscope::loader::Config cfg;
//   cfg.batch_size = 64;                               // from code
//   std::string err;
//   if (apply_env(cfg, &err) != 0 || validate(cfg, &err) != 0) die(err);
//
// docs/loader.md lists every knob and when to turn it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/loader/export.hpp"

namespace stallscope::loader {

enum class Backend : uint8_t { kAuto, kUring, kPread };
enum class Toggle : uint8_t { kAuto, kOn, kOff };
enum class ErrorPolicy : uint8_t { kFail, kSkip };
enum class DeviceKind : uint8_t { kAuto, kEmulated, kCuda, kNone };

struct Config {
  uint32_t workers = 2;           // preprocessing threads (task_arena size)
  uint32_t queue_depth = 32;      // storage reads in flight
  uint32_t prefetch_batches = 4;  // batches in flight (read, preprocessed, copied)
  uint32_t batch_size = 32;       // samples per batch
  uint32_t group_size = 0;        // samples per preprocessing task; 0 = auto
  uint64_t read_size = 1u << 20;  // bytes per read request (multiple of 4096)
  uint32_t pread_threads = 8;     // threads of the pread backend
  Toggle direct = Toggle::kAuto;  // O_DIRECT: auto = where the filesystem allows
  bool pinned = true;             // stage batches in pinned (locked) host memory
  bool huge_pages = true;         // buffers from 512 KiB advised onto THP (MADV_HUGEPAGE)
  bool drop_last = false;         // drop a last partial batch
  bool probe = true;              // storage probe at start (<= 0.5 s)
  ErrorPolicy on_error = ErrorPolicy::kFail;
  Backend backend = Backend::kAuto;
  DeviceKind device = DeviceKind::kAuto;
  double pinned_gbps = 24.0;   // emulated device: pinned H2D bandwidth, GB/s
  double pageable_gbps = 8.0;  // emulated device: pageable H2D bandwidth, GB/s
  uint64_t seed = 0;           // shuffle seed
  bool shuffle = true;
  uint32_t rank = 0;  // this rank's share of every epoch
  uint32_t world_size = 1;
};

// Applies STALLSCOPE_LOADER_* variables found in the environment. Returns 0,
// or -EINVAL with *error naming the variable and the accepted values.
STALLSCOPE_LOADER_API int apply_env(Config& cfg, std::string* error) noexcept;
// Same from a lookup function (tests); `get` returns nullptr when unset.
STALLSCOPE_LOADER_API int apply_env(Config& cfg, const char* (*get)(const char*),
                                    std::string* error) noexcept;
// Applies --loader-<knob>=<value> arguments; others are ignored and kept in
// *rest when given. Returns 0 or -EINVAL naming the flag.
STALLSCOPE_LOADER_API int apply_flags(Config& cfg, const std::vector<std::string>& args,
                                      std::string* error,
                                      std::vector<std::string>* rest = nullptr) noexcept;
// Sets one knob by its name ("workers", "queue_depth", "prefetch", … as in
// --loader-<name>, with '_' for '-'). Returns 0; -EINVAL with *error saying
// what the knob accepts ("not an integer in [1, 256]"); -ENOENT for no such
// knob. cfg is unchanged on failure.
STALLSCOPE_LOADER_API int set_knob(Config& cfg, std::string_view name, std::string_view value,
                                   std::string* error) noexcept;
// Checks ranges and combinations. Returns 0 or -EINVAL naming the knob.
STALLSCOPE_LOADER_API int validate(const Config& cfg, std::string* error) noexcept;

STALLSCOPE_LOADER_API std::string_view backend_name(Backend b) noexcept;
STALLSCOPE_LOADER_API std::string_view device_kind_name(DeviceKind d) noexcept;

}  // namespace stallscope::loader
