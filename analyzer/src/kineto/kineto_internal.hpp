// Inside the PyTorch profiler importer: the JSON bytes as a stream (a file,
// a gzip file inflated as it is read, text in memory), one trace event as
// the parser hands it over (raw views into the parser's window, no copies),
// and the mapper that turns it into the analyzer's events.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kineto/kineto.hpp"
#include "scope.hpp"

namespace stallscope::analyzer::kineto {

// The JSON text of one trace, front to back, never held whole.
class Source {
 public:
  virtual ~Source() = default;
  // Copies up to n bytes to dst; fewer only at the end, 0 past it. Throws
  // ImportError (a corrupt or truncated gzip, a bomb, the size limit).
  virtual size_t read(char* dst, size_t n) = 0;
};
// `path`, inflated while it is read when it starts with gzip's magic.
// `lenient` (sniffing): a cut or corrupt gzip ends the stream instead.
std::unique_ptr<Source> open_source(const std::string& path, uint64_t max_bytes, bool lenient);
std::unique_ptr<Source> memory_source(std::string_view text);

// Trace event categories, old and new names folded together.
enum class Cat : uint8_t {
  kNone,           // no "cat": the autograd profiler's CPU functions
  kHostOp,         // cpu_op, Operator
  kAnnotation,     // user_annotation (record_function)
  kGpuAnnotation,  // gpu_user_annotation: a copy of an annotation on a stream
  kKernel,         // kernel, Kernel
  kMemcpy,         // gpu_memcpy, Memcpy
  kMemset,         // gpu_memset, Memset
  kRuntime,        // cuda_runtime, Runtime
  kDriver,         // cuda_driver, Driver
  kSync,           // cuda_sync (the device's view of a synchronization)
  kPython,         // python_function
  kOther,          // anything else (Trace, overhead, flows …): ignored
};

// A pid or tid: a number, or a string ("stream 7", "CPU functions").
struct Id {
  bool present = false, is_string = false;
  int64_t num = 0;
  std::string_view str;  // raw JSON text inside the quotes (is_string), valid during add()
};

// A JSON string as raw text: the bytes between the quotes, escapes kept.
// Prefix tests and the short names we match need no unescaping.
struct Raw {
  const char* p = nullptr;        // first byte after the opening quote; null = absent
  std::string_view view() const;  // up to the closing quote
  bool starts_with(std::string_view s) const;
  explicit operator bool() const noexcept { return p != nullptr; }
};

struct RawArgs {
  int64_t bytes = -1, in_nelems = -1, group_size = -1, correlation = -1, device = -1, stream = -1;
  Raw dtype, collective;
  std::string_view process_group;  // "Process Group Name", quotes stripped
};

struct RawEvent {
  char ph = 0;
  Cat cat = Cat::kNone;
  bool has_cat = false, lower_cat = false;  // lower_cat: a current-schema category name
  Raw name;
  Id pid, tid;
  bool has_ts = false, has_dur = false;
  int64_t ts_ns = 0, dur_ns = 0;
  const char* bad_time = nullptr;  // "ts" or "dur": a number out of range
  RawArgs args;
  uint64_t offset = 0;  // byte offset of the event in the JSON
};

Cat classify_cat(std::string_view c, bool* lower);

// What step inference reads of a trace without ProfilerStep#N (names are
// interned by the Mapper: valid while it lives).
struct HostRec {  // a host range: operator, annotation, Python frame
  int64_t a, b;
  std::string_view name;
  uint32_t track;
  Cat cat;
};
struct KernelRec {  // a kernel on a stream
  int64_t a, b;
  std::string_view name;
  uint32_t track;
  uint32_t stream;  // the trace's stream id
};

// Steps of a trace that marks none (docs/kineto-import.md "Steps when none
// are marked"): from the trainer thread's repeated top-level ranges, else
// from the period of the kernel sequence on the main compute stream, else
// one whole-trace window. `host` and `kernels` are reordered.
struct InferredSteps {
  StepSource source = StepSource::kNone;  // kInferred, kWholeTrace or kNone (no activity)
  std::string detail;                     // what delimited them
  bool has_track = false;                 // `track`: the trainer thread found
  uint32_t track = 0;
  std::vector<std::pair<int64_t, int64_t>> steps;  // [start, end) ns, in start order
};
InferredSteps infer_steps(std::vector<HostRec>& host, std::vector<KernelRec>& kernels,
                          int64_t first_ns, int64_t last_ns);

// Builds one rank's events from raw trace events.
class Mapper {
 public:
  explicit Mapper(ImportedRank& out);
  void add(const RawEvent& e);
  // A trace event the parser could not hand over (`why`, at byte `offset`).
  void add_skipped(uint64_t offset, const char* why);
  // After the last event: correlates syncs, numbers the collectives.
  void finish();

 private:
  void skip(const RawEvent& e, const char* why);
  void host_event(const RawEvent& e);
  void device_event(const RawEvent& e);
  void api_event(const RawEvent& e);
  uint32_t host_track(const RawEvent& e);
  uint32_t device_track(const RawEvent& e);
  void push(Ev ev);
  void add_inferred_steps();
  void trainer_ops();
  uint32_t span_name(std::string_view name);
  std::string_view intern(std::string_view s);

  ImportedRank& out_;
  RankTrace& t_;
  RankScope scope_;  // names and tracks of the rank
  // The trace's own identities: (pid, tid) of host threads, (device, stream).
  std::unordered_map<uint64_t, uint32_t> host_tracks_, device_tracks_;
  // Names step inference and string pids/tids keep past the parser's
  // window; past kMaxNames distinct ones, "(other)".
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_set<std::string, Hash, std::equal_to<>> names_;
  static constexpr size_t kMaxNames = size_t{1} << 20;
  std::unordered_map<std::string_view, uint64_t> string_ids_;  // string pids/tids (interned)
  size_t range_names_ = 0;                                     // distinct range names kept
  size_t span_names_ = 0;  // distinct operator, frame and call names kept
  static constexpr size_t kMaxSpanNames = size_t{1} << 16;
  std::unordered_set<int64_t> sync_corr_;
  uint64_t waits_ = 0;
  std::vector<HostRec> host_recs_;  // for step inference
  std::vector<KernelRec> kernel_recs_;
  bool saw_lower_ = false, saw_upper_ = false, saw_cat_ = false;
};

// The parser's position in the file: turns a pointer into the simdjson
// document being read into a byte offset of the (decompressed) JSON.
struct Where {
  const char* base = nullptr;  // the document's first byte
  uint64_t origin = 0;         // its offset in the JSON
  // Bytes added by U+FFFD replacements: (end of a replacement in the
  // document, bytes added up to it), in order; empty when none.
  const std::vector<std::pair<size_t, size_t>>* grown = nullptr;
  uint64_t at(const char* p) const;
};

// The parser's window: a batch of trace events is what it holds when
// full; one event larger grows it up to `max`, past which it is skipped.
struct Window {
  size_t first = size_t{4} << 20;
  size_t max = size_t{64} << 20;
};

// Walks the JSON as it streams from `src` (through a Window, the trace
// events parsed by simdjson in batches) and feeds every trace event to
// `m`; fills rank, world size, base time, json_bytes and warnings of `out`.
// Throws ImportError naming the file and the byte offset.
void parse_trace(Source& src, const std::string& name, Mapper& m, ImportedRank& out,
                 Window window = {});

// Invalid UTF-8 replaced by U+FFFD (docs/kineto-import.md): how many
// bytes, and where the first was.
struct Utf8Fixes {
  uint64_t bytes = 0, first = 0;
};

// Parses one batch `[ev, ev, ...]` (`doc` at byte `origin` of the JSON,
// readable simdjson::SIMDJSON_PADDING bytes past `len`) and feeds its
// events to `m`. Throws ImportError.
void parse_batch(simdjson::ondemand::parser& parser, const char* doc, size_t len, uint64_t origin,
                 const std::string& name, Mapper& m, Utf8Fixes& fixes);
// distributedInfo's value, as a batch `[v]`.
void parse_dist_info(simdjson::ondemand::parser& parser, const char* doc, size_t len,
                     uint64_t origin, ImportedRank& out);
// A JSON integer (or a quoted one) in `text`; false when it is none.
bool parse_int(std::string_view text, int64_t* out);

}  // namespace stallscope::analyzer::kineto
