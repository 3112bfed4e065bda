// The recorder's configuration: every STALLSCOPE_* variable it reads,
// parsed and validated once into one immutable struct
// (docs/configuration.md lists them). A bad value is reported once on
// stderr, naming the variable, and the default is used: a typo in a
// tracing setting must never stop a training job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stallscope/internal/run_identity.hpp"

namespace stallscope::detail {

enum class DiskMode { kStop, kRing };

struct RecorderConfig {
  bool enabled = true;               // STALLSCOPE_ENABLE=0 turns recording off
  bool capture_at_start = true;      // STALLSCOPE_CAPTURE=on|off
  size_t buffer_bytes = 64u << 20;   // STALLSCOPE_BUFFER_MB: all thread buffers
  size_t thread_buffer_bytes = 2u << 20;  // STALLSCOPE_THREAD_BUFFER_KB (power of 2)
  uint64_t max_file_bytes = 256ull << 20; // STALLSCOPE_MAX_MB: per file (0 = none)
  bool max_for_fsize = false;             // max_file_bytes lowered for the file-size limit
  DiskMode disk_mode = DiskMode::kStop;   // STALLSCOPE_MAX_MODE=stop|ring
  int flush_ms = 100;                // STALLSCOPE_FLUSH_MS
  int sample_ms = 10;                // STALLSCOPE_SAMPLE_MS (0 = sampler off)
  // STALLSCOPE_WORKER_SAMPLE_MS: the sampler's period in a process forked
  // (without exec) from a sampling process, until it records a step; its
  // parent's sampler already reads its CPU time every tick. 0 = sample_ms.
  int worker_sample_ms = 100;
  bool quiet = false;                // STALLSCOPE_QUIET=1: no notes on stderr
  bool progress = false;             // STALLSCOPE_PROGRESS=on: step progress file (stallscope run)
  std::vector<std::string> warnings; // what was wrong, printed once at start
};

// Reads the configuration from `env` (the process environment by default).
RecorderConfig load_config(const sys::EnvLookup& env);

// Keeps the trace file under a file-size limit of `limit` bytes (the soft
// RLIMIT_FSIZE, `ulimit -f`; 0 = none): a write past it would fail (or kill
// a thread that does not block SIGXFSZ). The budget (max_file_bytes) is
// lowered to leave room for the closing chunk, with a warning; a limit too
// small for a useful file turns recording off. load_config() applies the
// process's own limit.
void apply_file_size_limit(RecorderConfig& cfg, uint64_t limit);

// Turns recording off, with a warning, when the soft RLIMIT_NOFILE
// (`ulimit -n`) `limit` is below sys::kMinNofile: the trace file and the
// sampler's files would take descriptors the program counts on
// (RELIABILITY.md 36). load_config() applies the process's own limit.
void apply_nofile_limit(RecorderConfig& cfg, uint64_t limit);

// Thread buffer size actually used: a power of two in [64 KiB, 1 GiB].
size_t round_buffer_size(size_t bytes) noexcept;

}  // namespace stallscope::detail
