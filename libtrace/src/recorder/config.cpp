#include "recorder/config.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "stallscope/internal/config.hpp"
#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::detail {
namespace {

// Reads each variable through the configuration table
// (stallscope/internal/config.hpp): its parser, range, message and default.
struct Reader {
  const sys::EnvLookup& env;
  RecorderConfig& cfg;

  void bad(const char* why) { cfg.warnings.emplace_back(why); }

  // An integer variable's value, or its default when unset or bad.
  int64_t integer(config::Id id) {
    const config::Var& v = config::var(id);
    char why[config::kMessageBytes];
    int64_t x = 0;
    const config::Read r = config::read_integer(v, env(v.name), &x, why, sizeof why);
    if (r == config::Read::kBad) bad(why);
    return r == config::Read::kOk ? x : config::default_integer(v);
  }

  // An on/off variable's value, or its default.
  bool on_off(config::Id id) {
    const config::Var& v = config::var(id);
    char why[config::kMessageBytes];
    bool on = false;
    const config::Read r = config::read_switch(v, env(v.name), &on, why, sizeof why);
    if (r == config::Read::kBad) bad(why);
    return r == config::Read::kOk ? on : config::default_switch(v);
  }

  // The index of a word variable's word, or of its default.
  int word(config::Id id) {
    const config::Var& v = config::var(id);
    char why[config::kMessageBytes];
    int i = 0;
    const config::Read r = config::read_word(v, env(v.name), &i, why, sizeof why);
    if (r == config::Read::kBad) bad(why);
    return r == config::Read::kOk ? i : config::default_word(v);
  }
};

std::string megabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / double(1u << 20));
  return text;
}

// A budget past an eighth of the machine's memory would take the job's
// memory for the recorder (valid values go to 64 GiB): capped, with a note.
void cap_by_machine_memory(RecorderConfig& cfg) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const uint64_t total = uint64_t(pages) * uint64_t(page);
  const size_t cap = std::max<size_t>(size_t{1} << 20, (total / 8) & ~((size_t{1} << 20) - 1));
  if (cfg.buffer_bytes <= cap) return;
  cfg.warnings.push_back("STALLSCOPE_BUFFER_MB=" + std::to_string(cfg.buffer_bytes >> 20) +
                         " is more than an eighth of this machine's " +
                         std::to_string(total >> 20) + " MiB of memory; using " +
                         std::to_string(cap >> 20) + " MiB");
  cfg.buffer_bytes = cap;
}

}  // namespace

void apply_file_size_limit(RecorderConfig& cfg, uint64_t limit) {
  if (limit == 0 || !cfg.enabled) return;
  constexpr uint64_t kMinFile = 1u << 20;
  const uint64_t room = std::max<uint64_t>(64u << 10, limit / 16);  // closing chunk, rotation
  const uint64_t cap = limit > room ? limit - room : 0;
  if (cap < kMinFile) {
    cfg.enabled = false;
    cfg.warnings.push_back("the file-size limit (ulimit -f) of " + megabytes(limit) +
                           " leaves no room for a trace file; tracing is off");
    return;
  }
  if (cfg.max_file_bytes != 0 && cfg.max_file_bytes <= cap) return;
  cfg.warnings.push_back("the file-size limit (ulimit -f) of " + megabytes(limit) +
                         " lowers the trace file budget (STALLSCOPE_MAX_MB) to " +
                         megabytes(cap));
  cfg.max_file_bytes = cap;
  cfg.max_for_fsize = true;
}

void apply_nofile_limit(RecorderConfig& cfg, uint64_t limit) {
  if (limit >= sys::kMinNofile || !cfg.enabled) return;
  cfg.enabled = false;
  cfg.warnings.push_back("RLIMIT_NOFILE (ulimit -n) is " + std::to_string(limit) +
                         "; tracing is off so the program keeps its descriptors (raise "
                         "ulimit -n to at least " +
                         std::to_string(sys::kMinNofile) + ")");
}

size_t round_buffer_size(size_t bytes) noexcept {
  size_t n = 64u << 10;
  while (n < bytes && n < (size_t{1} << 30)) n <<= 1;
  return n;
}

RecorderConfig load_config(const sys::EnvLookup& env) {
  RecorderConfig cfg;
  Reader r{env, cfg};
  using config::Id;
  // Every value, defaults included, comes from the table.
  cfg.enabled = r.on_off(Id::kEnable);
  cfg.capture_at_start = r.on_off(Id::kCapture);
  cfg.quiet = r.on_off(Id::kQuiet);
  cfg.progress = r.on_off(Id::kProgress);
  cfg.buffer_bytes = size_t(r.integer(Id::kBufferMb)) << 20;
  cfg.thread_buffer_bytes = round_buffer_size(size_t(r.integer(Id::kThreadBufferKb)) << 10);
  cfg.max_file_bytes = uint64_t(r.integer(Id::kMaxMb)) << 20;
  cfg.disk_mode = r.word(Id::kMaxMode) == 1 ? DiskMode::kRing : DiskMode::kStop;
  cfg.flush_ms = int(r.integer(Id::kFlushMs));
  cfg.sample_ms = int(r.integer(Id::kSampleMs));
  cfg.worker_sample_ms = int(r.integer(Id::kWorkerSampleMs));
  cap_by_machine_memory(cfg);
  if (cfg.thread_buffer_bytes > cfg.buffer_bytes) {
    cfg.warnings.push_back("STALLSCOPE_THREAD_BUFFER_KB exceeds STALLSCOPE_BUFFER_MB; "
                           "one thread buffer uses the whole budget");
    cfg.thread_buffer_bytes = round_buffer_size(cfg.buffer_bytes);
    if (cfg.thread_buffer_bytes > cfg.buffer_bytes) cfg.thread_buffer_bytes >>= 1;
  }
  apply_nofile_limit(cfg, sys::nofile_limit());
  rlimit fsize{};
  if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY) {
    apply_file_size_limit(cfg, std::max<uint64_t>(fsize.rlim_cur, 1));
  }
  return cfg;
}

}  // namespace stallscope::detail
