// The STALLSCOPE_* configuration table: every variable any part of
// stallscope reads (recorder, preload shim, loader, CUDA library, CLI,
// Python hooks, samples), with its type, range, default and one line of
// documentation, and the typed parsers every C++ component reads its
// settings through. docs/configuration.md's reference table is generated
// from it (scripts/config_doc.sh) and a test keeps the two equal.
//
//   const config::Var& v = config::var(config::Id::kSampleMs);
//   int64_t ms = 10;
//   char why[config::kMessageBytes];
//   if (config::read_integer(v, std::getenv(v.name), &ms, why, sizeof why) == config::Read::kBad)
//     note(why);
//   // STALLSCOPE_SAMPLE_MS='10ms': not a number (expected 0..60000 ms); using the default 10
//
// The parsers never allocate and never throw: the preload shim calls them
// in its constructor, before the program's allocator may be ready. A bad
// value is reported, never fatal: the default is used and the job goes on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stallscope::config {

enum class Type : uint8_t {
  kSwitch,   // on or off (also 1/0, true/false)
  kInteger,  // a plain decimal integer in [lo, hi]: no blanks, no '+', no unit
  kWord,     // one of `words`
  kText,     // a path, a list or an id: taken as given
  kKnob,     // a loader knob: parsed by the loader's knob table (docs/loader.md)
};

// X(id, name, type, lo, hi, unit, words, default, readers, doc)
//   words: kWord's choices, "a|b|c"; default: as the user would write it
//   ("" = none, or derived as the doc says); readers: who reads it.
// Rows with readers "python" or "samples" are read by the Python hooks or
// the sample programs, not by C++ code through this table; they are here so
// that the documentation lists every variable.
// clang-format off
#define STALLSCOPE_CONFIG_VARS(X)                                                                  \
  /* run identity */                                                                               \
  X(kOut, "STALLSCOPE_OUT", kText, 0, 0, "", "", "", "recorder, cli",                              \
    "The run directory; unset: derived from the job, under STALLSCOPE_DIR")                        \
  X(kDir, "STALLSCOPE_DIR", kText, 0, 0, "", "", ".", "recorder, cli",                             \
    "Where derived run directories are created")                                                   \
  X(kRunKey, "STALLSCOPE_RUN_KEY", kText, 0, 0, "", "", "", "recorder, cli",                       \
    "The run's identity, passed to child processes (set by stallscope, not by hand)")              \
  X(kRank, "STALLSCOPE_RANK", kInteger, 0, 2147483647, "", "", "", "recorder, cli",                \
    "This process's rank, where the launcher is not recognised (a bad value is skipped)")          \
  X(kWorldSize, "STALLSCOPE_WORLD_SIZE", kInteger, 1, 2147483647, "", "", "", "recorder, cli",     \
    "The number of ranks, where the launcher is not recognised (a bad value is skipped)")          \
  /* recorder */                                                                                   \
  X(kEnable, "STALLSCOPE_ENABLE", kSwitch, 0, 0, "", "", "on", "recorder",                         \
    "off records nothing; the program runs as if untraced")                                        \
  X(kCapture, "STALLSCOPE_CAPTURE", kSwitch, 0, 0, "", "", "on", "recorder",                       \
    "Capture state at start; off waits for the control file or stallscope_capture_set(1)")         \
  X(kBufferMb, "STALLSCOPE_BUFFER_MB", kInteger, 1, 65536, "MiB", "", "64", "recorder",            \
    "Memory budget of all thread buffers of one process")                                          \
  X(kThreadBufferKb, "STALLSCOPE_THREAD_BUFFER_KB", kInteger, 64, 1048576, "KiB", "", "2048",      \
    "recorder", "Size of one thread's buffer, rounded up to a power of two")                       \
  X(kMaxMb, "STALLSCOPE_MAX_MB", kInteger, 0, 1073741824, "MiB", "", "256", "recorder",            \
    "Disk budget of one trace file (0 = unlimited)")                                               \
  X(kMaxMode, "STALLSCOPE_MAX_MODE", kWord, 0, 0, "", "stop|ring", "stop", "recorder",             \
    "At the disk budget: stop (drop and count) or ring (keep the newest segments)")                \
  X(kFlushMs, "STALLSCOPE_FLUSH_MS", kInteger, 1, 60000, "ms", "", "100", "recorder",              \
    "Longest interval between two flushes to the file")                                            \
  X(kSampleMs, "STALLSCOPE_SAMPLE_MS", kInteger, 0, 60000, "ms", "", "10", "recorder",             \
    "Period of the CPU sampler (0 = off)")                                                         \
  X(kWorkerSampleMs, "STALLSCOPE_WORKER_SAMPLE_MS", kInteger, 0, 60000, "ms", "", "100",           \
    "recorder", "Sampling period of a forked worker until it records a step (0 = as SAMPLE_MS)")   \
  X(kQuiet, "STALLSCOPE_QUIET", kSwitch, 0, 0, "", "", "off", "recorder, shim, loader, cuda",      \
    "on silences every note stallscope writes on stderr")                                          \
  X(kProgress, "STALLSCOPE_PROGRESS", kSwitch, 0, 0, "", "", "off", "recorder",                    \
    "on writes `RUN/progress/<file base>` after each flush that changed it (stallscope run)")        \
  /* preload shim */                                                                               \
  X(kMmapFaults, "STALLSCOPE_MMAP_FAULTS", kSwitch, 0, 0, "", "", "on", "shim",                    \
    "off stops sampling major page faults (reads of memory-mapped files)")                         \
  X(kFollow, "STALLSCOPE_FOLLOW", kWord, 0, 0, "", "children|none", "children", "shim, cli",       \
    "Whether programs the traced program execs are traced too")                                    \
  X(kPreloadLib, "STALLSCOPE_PRELOAD_LIB", kText, 0, 0, "", "", "", "cli",                         \
    "Where stallscope run finds the shim; default: `<bin>/../lib`")                                  \
  X(kPreloadClassifyEvery, "STALLSCOPE_PRELOAD_CLASSIFY_EVERY", kInteger, 1, 1048576, "reads", "", \
    "256", "shim", "One read in N has its page-cache state looked up")                             \
  X(kPreloadWaitMinUs, "STALLSCOPE_PRELOAD_WAIT_MIN_US", kInteger, 0, 1000000, "µs", "", "20",     \
    "shim", "A channel message or relay wait that blocked for less is no data wait")               \
  X(kPreloadRelays, "STALLSCOPE_PRELOAD_RELAYS", kSwitch, 0, 0, "", "", "on", "shim",              \
    "Whether waits on condition variables and semaphores are watched for hand-offs")               \
  X(kPreloadSockets, "STALLSCOPE_PRELOAD_SOCKETS", kSwitch, 0, 0, "", "", "on", "shim",            \
    "Whether reads from network sockets are storage reads")                                        \
  X(kPreloadSocketMinUs, "STALLSCOPE_PRELOAD_SOCKET_MIN_US", kInteger, 0, 1000000, "µs", "", "20", \
    "shim", "Shorter socket reads are summed into one record per that much time (0: each)")        \
  X(kPreloadDirect, "STALLSCOPE_PRELOAD_DIRECT", kSwitch, 0, 0, "", "", "on", "shim",              \
    "Whether reads of local files make their system call in the shim")                             \
  X(kPreloadNativeStacksHz, "STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ", kInteger, 0, 1000, "Hz", "",    \
    "0", "shim", "Native stack samples per second of each thread's CPU time (0 = off)")            \
  /* GPU side */                                                                                   \
  X(kCupti, "STALLSCOPE_CUPTI", kWord, 0, 0, "", "yield|keep|off", "yield", "cuda",                \
    "What stallscope does with CUPTI (gpu.md)")                                                    \
  X(kCuptiLib, "STALLSCOPE_CUPTI_LIB", kText, 0, 0, "", "", "", "cuda",                            \
    "The CUPTI library to load; default: the toolkit's, then libcupti.so")                         \
  X(kCuptiStepIds, "STALLSCOPE_CUPTI_STEP_IDS", kSwitch, 0, 0, "", "", "on", "cuda",               \
    "Whether the CUDA calls of each step are tagged with the step's index")                        \
  X(kCudaDriverLib, "STALLSCOPE_CUDA_DRIVER_LIB", kText, 0, 0, "", "", "libcuda.so.1", "cuda",     \
    "The CUDA driver library whose presence is checked before CUPTI is loaded")                    \
  X(kNvmlLib, "STALLSCOPE_NVML_LIB", kText, 0, 0, "", "", "libnvidia-ml.so.1", "topo",          \
    "The NVML library the topology capture loads")                                                 \
  X(kCudartLib, "STALLSCOPE_CUDART_LIB", kText, 0, 0, "", "", "", "cli",                           \
    "The CUDA runtime stallscope topo --probe loads")                                              \
  /* command line */                                                                               \
  X(kPythonDir, "STALLSCOPE_PYTHON_DIR", kText, 0, 0, "", "", "", "cli",                           \
    "Where stallscope run finds the Python hooks")                                                 \
  X(kSamplesDir, "STALLSCOPE_SAMPLES_DIR", kText, 0, 0, "", "", "", "cli",                         \
    "Where stallscope demo finds the sample programs")                                             \
  /* Python hooks (documented here, read by integrations/python) */                               \
  X(kPythonHooks, "STALLSCOPE_PYTHON_HOOKS", kSwitch, 0, 0, "", "", "on", "python",                \
    "off turns the DataLoader hooks off (set on by stallscope run)")                               \
  X(kLib, "STALLSCOPE_LIB", kText, 0, 0, "", "", "", "python",                                     \
    "The libstallscope_trace the Python module loads")                                             \
  X(kPyStacksHz, "STALLSCOPE_PY_STACKS_HZ", kText, 0, 0, "Hz", "", "25", "python",                 \
    "Rate of the Python stack sampler, 0 to 250 (0 = off)")                                        \
  X(kSet, "STALLSCOPE_SET", kText, 0, 0, "", "", "", "python, samples, cli",                       \
    "KEY=VALUE settings applied without editing the program (stallscope run --set)")               \
  X(kHeadspace, "STALLSCOPE_HEADSPACE", kText, 0, 0, "batches", "", "", "python, cli",            \
    "Replay each DataLoader's first K batches (stallscope run --headspace)")                       \
  X(kHeadspaceBytes, "STALLSCOPE_HEADSPACE_BYTES", kText, 0, 0, "bytes", "", "2147483648", "python", \
    "The most tensor bytes --headspace keeps")                                                     \
  X(kTrial, "STALLSCOPE_TRIAL", kText, 0, 0, "", "", "", "cli",                                    \
    "1 in the job's environment during a stallscope tune trial (set, never read)")                 \
  /* sample programs */                                                                            \
  X(kTrainerMpiModule, "STALLSCOPE_TRAINER_MPI_MODULE", kText, 0, 0, "", "", "", "samples",        \
    "The sample trainer's MPI module")                                                             \
  X(kTrainerNcclLib, "STALLSCOPE_TRAINER_NCCL_LIB", kText, 0, 0, "", "", "", "samples",            \
    "The NCCL library the sample trainer loads")                                                   \
  /* loader knobs (their syntax: docs/loader.md) */                                                \
  X(kLoaderWorkers, "STALLSCOPE_LOADER_WORKERS", kKnob, 1, 256, "", "", "", "loader",              \
    "Preprocessing threads")                                                                       \
  X(kLoaderQueueDepth, "STALLSCOPE_LOADER_QUEUE_DEPTH", kKnob, 1, 4096, "", "", "", "loader",      \
    "Storage reads in flight")                                                                     \
  X(kLoaderPrefetch, "STALLSCOPE_LOADER_PREFETCH", kKnob, 1, 1024, "", "", "", "loader",           \
    "Batches prepared ahead")                                                                      \
  X(kLoaderBatchSize, "STALLSCOPE_LOADER_BATCH_SIZE", kKnob, 1, 1048576, "", "", "", "loader",     \
    "Samples per batch")                                                                           \
  X(kLoaderGroupSize, "STALLSCOPE_LOADER_GROUP_SIZE", kKnob, 0, 1048576, "", "", "", "loader",     \
    "Samples per preprocessing task (0 = auto)")                                                   \
  X(kLoaderReadSize, "STALLSCOPE_LOADER_READ_SIZE", kKnob, 4096, 1073741824, "bytes", "", "",     \
    "loader", "Bytes per storage read, a multiple of 4096 (K/M/G suffixes)")                       \
  X(kLoaderPreadThreads, "STALLSCOPE_LOADER_PREAD_THREADS", kKnob, 1, 256, "", "", "", "loader",   \
    "Threads of the pread backend")                                                                \
  X(kLoaderDirect, "STALLSCOPE_LOADER_DIRECT", kKnob, 0, 0, "", "auto|on|off", "", "loader",       \
    "O_DIRECT reads")                                                                              \
  X(kLoaderPinned, "STALLSCOPE_LOADER_PINNED", kKnob, 0, 0, "", "on|off", "", "loader",            \
    "Pinned staging buffers")                                                                      \
  X(kLoaderHugePages, "STALLSCOPE_LOADER_HUGE_PAGES", kKnob, 0, 0, "", "on|off", "", "loader",     \
    "Buffers advised onto transparent huge pages (MADV_HUGEPAGE)")                                 \
  X(kLoaderDropLast, "STALLSCOPE_LOADER_DROP_LAST", kKnob, 0, 0, "", "on|off", "", "loader",       \
    "Drop an epoch's last, incomplete batch")                                                      \
  X(kLoaderProbe, "STALLSCOPE_LOADER_PROBE", kKnob, 0, 0, "", "1|0", "", "loader",                 \
    "Probe the first files at several queue depths")                                               \
  X(kLoaderShuffle, "STALLSCOPE_LOADER_SHUFFLE", kKnob, 0, 0, "", "on|off", "", "loader",          \
    "Shuffle the samples of each epoch")                                                           \
  X(kLoaderErrorPolicy, "STALLSCOPE_LOADER_ERROR_POLICY", kKnob, 0, 0, "", "fail|skip", "",        \
    "loader", "What a file that cannot be read does")                                              \
  X(kLoaderBackend, "STALLSCOPE_LOADER_BACKEND", kKnob, 0, 0, "", "uring|pread|auto", "", "loader",\
    "The storage reader")                                                                          \
  X(kLoaderDevice, "STALLSCOPE_LOADER_DEVICE", kKnob, 0, 0, "", "auto|emulated|cuda|none", "",     \
    "loader", "Where batches are copied")                                                          \
  X(kLoaderPinnedGbps, "STALLSCOPE_LOADER_PINNED_GBPS", kKnob, 0, 0, "GB/s", "", "", "loader",     \
    "Modelled pinned H2D bandwidth (emulated device)")                                             \
  X(kLoaderPageableGbps, "STALLSCOPE_LOADER_PAGEABLE_GBPS", kKnob, 0, 0, "GB/s", "", "", "loader", \
    "Modelled pageable H2D bandwidth (emulated device)")                                           \
  X(kLoaderSeed, "STALLSCOPE_LOADER_SEED", kKnob, 0, 0, "", "", "", "loader",                      \
    "Seed of the shuffle")                                                                         \
  X(kLoaderRank, "STALLSCOPE_LOADER_RANK", kKnob, 0, 1048575, "", "", "", "loader",                \
    "This rank's share of the dataset")                                                            \
  X(kLoaderWorldSize, "STALLSCOPE_LOADER_WORLD_SIZE", kKnob, 1, 1048576, "", "", "", "loader",     \
    "The number of shares of the dataset")
// clang-format on

enum class Id : uint16_t {
#define STALLSCOPE_CONFIG_ID(id, ...) id,
  STALLSCOPE_CONFIG_VARS(STALLSCOPE_CONFIG_ID)
#undef STALLSCOPE_CONFIG_ID
};

struct Var {
  Id id;
  const char* name;
  Type type;
  int64_t lo, hi;       // kInteger's range
  const char* unit;     // of a number: "ms", "µs", "MiB", …; "" for none
  const char* words;    // kWord's choices, "a|b|c"
  const char* dflt;     // the default as written; "" when none or derived
  const char* readers;  // the components that read it
  const char* doc;      // one line
};

// Every row, in the order above.
std::span<const Var> table() noexcept;
const Var& var(Id id) noexcept;
// The row of `name`, or nullptr.
const Var* find(std::string_view name) noexcept;

enum class Read : uint8_t {
  kUnset,  // null or empty: the default applies, nothing said
  kOk,     // *out holds the value
  kBad,    // *out unchanged; `why` holds the message
};

// Room for any message below (values are cut at 160 bytes).
inline constexpr size_t kMessageBytes = 384;

// The parsers: `text` is the variable's value (getenv; null = unset). On
// kBad, `why` (when not null, `n` bytes) gets one line without a prefix:
//   STALLSCOPE_X='abc': not a number (expected 0..1000 µs); using the default 20
//   STALLSCOPE_X='5000': out of range (expected 0..1000 µs); using the default 20
//   STALLSCOPE_X='maybe': not on or off (expected on, off, 1, 0, true, false); using the default on
//   STALLSCOPE_X='big': not one of stop, ring; using the default stop
// Control bytes in the value are shown as '?'.
Read read_integer(const Var& v, const char* text, int64_t* out, char* why, size_t n) noexcept;
Read read_switch(const Var& v, const char* text, bool* out, char* why, size_t n) noexcept;
// *index: the position of the word in v.words.
Read read_word(const Var& v, const char* text, int* index, char* why, size_t n) noexcept;

// A row's default as a value (0, off or the first word where it has none).
int64_t default_integer(const Var& v) noexcept;
bool default_switch(const Var& v) noexcept;
int default_word(const Var& v) noexcept;

// The same over the process environment, the default applied: the value,
// and a message in `why` (when not null) on a bad one. For components
// whose defaults are the table's; others call the read_* above.
int64_t env_integer(Id id, char* why, size_t n) noexcept;
bool env_switch(Id id, char* why, size_t n) noexcept;
int env_word(Id id, char* why, size_t n) noexcept;

// STALLSCOPE_QUIET, read once per process image from the environment: true
// for on/1/true. A bad value counts as off (the recorder reports it).
bool quiet() noexcept;

// docs/configuration.md's reference table, rendered from table().
std::string markdown_table();

}  // namespace stallscope::config
