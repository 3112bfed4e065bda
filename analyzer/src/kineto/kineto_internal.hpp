// Inside the PyTorch profiler importer: one trace event as the parser hands
// it over (raw views into the JSON text, no copies), and the mapper that
// turns it into the analyzer's events.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kineto/kineto.hpp"
#include "scope.hpp"

namespace stallscope::analyzer::kineto {

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
  std::string_view str;  // raw JSON text inside the quotes (is_string)
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
// views into the JSON text: valid until the import returns).
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

  ImportedRank& out_;
  RankTrace& t_;
  RankScope scope_;  // names and tracks of the rank
  // The trace's own identities: (pid, tid) of host threads, (device, stream).
  std::unordered_map<uint64_t, uint32_t> host_tracks_, device_tracks_;
  std::unordered_map<std::string_view, uint64_t> string_ids_;  // string pids/tids
  size_t range_names_ = 0;  // distinct range names kept
  size_t span_names_ = 0;   // distinct operator, frame and call names kept
  static constexpr size_t kMaxSpanNames = size_t{1} << 16;
  std::unordered_set<int64_t> sync_corr_;
  uint64_t waits_ = 0;
  std::vector<HostRec> host_recs_;      // for step inference
  std::vector<KernelRec> kernel_recs_;
  bool saw_lower_ = false, saw_upper_ = false, saw_cat_ = false;
};

// Walks the JSON and feeds every trace event to `m`; fills rank, world
// size, base time and schema of `out`. Throws ImportError.
void parse_trace(const std::string& json, const std::string& name, Mapper& m, ImportedRank& out);

}  // namespace stallscope::analyzer::kineto
