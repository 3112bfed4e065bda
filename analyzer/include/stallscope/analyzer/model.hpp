// stallscope analyzer — the event model the analysis core consumes.
//
// The analyzer turns each decoded trace record (reader::RecordView) into a
// compact `Ev` — a common header and one typed payload per kind — on a
// rank-local track; RankScope (src/scope.hpp) maps file-scoped names, files
// and tracks to the rank's. The core never sees files, so tests can feed it
// a plain vector of events:
//
//   stallscope::analyzer::RankTrace t;
//   t.tracks = {{.proc = 0, .type = TrackType::kThread, .tid = 100}};
//   t.events.push_back(Ev::span(Kind::kStep, 0, 0, 10'000'000).with_corr(1));
//   auto result = stallscope::analyzer::analyze_rank(t, {});
//
// Times are int64 nanoseconds of one monotonic clock per rank.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "stallscope/analyzer/parts.hpp"
#include "stallscope/format.hpp"

namespace stallscope::analyzer {

using format::Kind;
using format::TrackType;

// One process of a rank (a trainer, a forked data worker).
struct ProcessDesc {
  uint32_t pid = 0;
  uint32_t ppid = 0;
  std::string host;
  std::string file;           // the trace file it came from ("" in memory)
  int64_t affinity_cpus = 0;  // metadata affinity_count (0 = unknown)
  std::string affinity;       // metadata affinity, a CPU list ("0-7,16") ("" = unknown)
  double quota_cores = 0;     // metadata cgroup_quota_cores (0 = none)
  int64_t online_cpus = 0;
  std::vector<std::string> cmdline;  // metadata "cmdline" (empty = unknown)
};

// One track of a rank: a host thread, a device stream, a process track.
struct TrackDesc {
  uint32_t proc = 0;  // index into RankTrace::procs
  TrackType type = TrackType::kThread;
  uint32_t tid = 0;     // OS thread id, or stream id
  uint32_t device = 0;  // device ordinal for device tracks
  std::string name;     // thread name
};

// ------------------------------------------------------------------ events --
// What each kind carries beyond the common header, in the trace format's
// terms (docs/trace-format.md). An Ev holds the one payload its kind names;
// reading another is a bug (the accessors check it in debug builds).

// kStorageRead.
struct StorageRead {
  uint64_t bytes;        // bytes returned
  uint64_t hit_bytes;    // of them, found in the page cache (cache kHit: all; kPartial: where known)
  uint64_t queued_ns;    // waiting for submission before the read
  uint64_t sample;       // dataset sample the read belongs to (0 = none)
  uint32_t file;         // rank-scoped file id (index into RankTrace::files; 0 = unknown)
  uint16_t queue_depth;  // reads in flight at submission (0 = not recorded)
  format::Tier tier;
  format::Cache cache;
  format::CacheMethod cache_method;
  // The read went to storage (latency): a miss or a partial hit.
  bool went_to_storage() const noexcept {
    return cache == format::Cache::kMiss || cache == format::Cache::kPartial;
  }
  // Bytes that came from storage, of a read whose cache state is known.
  uint64_t miss_bytes() const noexcept {
    switch (cache) {
      case format::Cache::kHit: return 0;
      case format::Cache::kPartial: return hit_bytes < bytes ? bytes - hit_bytes : 0;
      default: return bytes;
    }
  }
};

// kStep: who delimited it (format::StepSource: the API, a range, a hook,
// or an importer that inferred it from a trace without step marks).
struct StepMark {
  format::StepSource source;
};

// kPreprocess, kDataWait, kBatchReady.
struct Work {
  uint64_t sample;  // first sample of the item (0 = none)
  uint64_t batch;   // batch id (0 = none)
  uint32_t count;   // samples covered
  uint32_t worker;  // kPreprocess: worker index; kDataWait: how detected (format::WaitSource)
  uint32_t ids_at, ids_n;  // kBatchReady: its sample ids in RankTrace::ids
};

// kH2D, kD2H, kD2D, kMemset.
struct Copy {
  uint64_t bytes;
  format::MemKind src, dst;
};

// kCollective (host call or device kernel).
struct Collective {
  uint64_t comm;    // communicator id (0 with seq 0: no identity)
  uint64_t seq;     // per-communicator sequence number
  uint64_t bytes;   // message size S (docs/gpu.md)
  uint32_t nranks;  // ranks of the communicator (0 = unknown)
  format::CollOp op;
  bool enqueued;    // a host-side call that enqueued it (format::kCollEnqueued)
  bool join_only;   // the shim's call span beside the plugin's (format::kCollJoinOnly)
};

// kSample: one dataset item's load (or a fetch, a collate) inside a loader.
struct SampleSpan {
  uint64_t loader;      // loader id, unique within its process
  uint64_t batch;       // batch index within the generation
  uint64_t index;       // dataset index
  uint32_t generation;  // which iterator of the loader
  int32_t worker;       // -1: the trainer process itself
  uint32_t count;       // samples covered
  format::SamplePart part;
};

// kLoaderConfig: a loader's configuration at iterator creation (the
// dataset's class is Ev::name; the other names are RankTrace::names ids,
// 0 = unknown). Packed to fit the payload: workers and prefetch past
// 65535 are clamped.
struct LoaderConfig {
  uint64_t loader;
  uint64_t dataset_len;  // 0 unknown
  uint32_t generation;
  uint32_t batch_size;       // 0: None or unknown
  uint16_t num_workers;
  uint16_t prefetch_factor;  // 0: not applicable or unknown
  uint32_t site;             // "train.py:42"
  uint32_t sampler, batch_sampler, collate;  // class / function names
  format::PinMemory pin_memory;
  format::MpContext mp_context;
  format::DatasetKind dataset_kind;
  bool persistent_workers : 1, drop_last : 1, in_order : 1;
  bool getitems : 1;    // the dataset has __getitems__
  bool overridden : 1;  // a setting came from `stallscope run --set`
};

// kBatchHandoff: a batch from a loader worker to the trainer (start = put,
// end = received).
struct BatchHandoff {
  uint64_t loader;
  uint64_t batch;
  int64_t asked_ns;     // when the trainer asked for it (0 = unknown)
  uint32_t generation;
  int32_t worker;
  uint32_t worker_pid;
};

// kChannelHandoff: one object through a channel stallscope did not build
// (start = put, end = get), on the consumer's track (which names it).
struct ChannelHandoff {
  uint64_t channel;
  uint64_t object;       // 0 = none
  uint64_t bytes;        // 0 = unknown
  int64_t asked_ns;      // when the consumer's get began (0 = unknown)
  uint32_t producer_pid, producer_tid;
  uint32_t parts;        // reads or writes that carried it (0 = unknown)
  format::ChannelType type;
};

// kStackSample: one stack of one thread. Its innermost frame is Ev::name;
// the whole stack stays in the trace (the engine keeps no per-sample frames).
struct StackSample {
  uint64_t interval_ns;  // the time the sample stands for
  uint32_t tid;
  uint32_t cost_ns;      // what taking the sample cost
  uint16_t frames;       // frames in the record
  format::OnCpu on_cpu;
  uint8_t flags;         // format::kStackLate | kStackTruncated | kStackNative
};

// A decoded event: a common header and one payload chosen by `kind`.
// Built by RankScope (scope.hpp) from a trace file or an imported profiler
// trace, or by hand in tests:
//
//   Ev e = Ev::span(Kind::kStorageRead, track, t0, t1);
//   e.io().bytes = 4096;
struct Ev {
  Kind kind = Kind::kMark;
  uint8_t phase = format::kComplete;  // format::Phase
  bool emulated = false;              // kEmulated flag
  uint32_t track = 0;                 // index into RankTrace::tracks
  uint32_t name = 0;                  // index into RankTrace::names (0 = none)
  int64_t start = 0, end = 0;         // ns; end == start for instants and begin/end marks
  uint64_t corr = 0;                  // step index, batch id, counter subject, gap count …

  int64_t dur() const noexcept { return end - start; }
  static Ev span(Kind k, uint32_t track, int64_t start, int64_t end) {
    Ev e;
    e.kind = k;
    e.track = track;
    e.start = start;
    e.end = end;
    return e;
  }
  Ev& with_corr(uint64_t c) { corr = c; return *this; }

  // The payload of this kind.
  StorageRead& io() { return is(Kind::kStorageRead), u_.io; }
  const StorageRead& io() const { return is(Kind::kStorageRead), u_.io; }
  StepMark& step() { return is(Kind::kStep), u_.step; }
  const StepMark& step() const { return is(Kind::kStep), u_.step; }
  Work& work() { return is_work(), u_.work; }
  const Work& work() const { return is_work(), u_.work; }
  Copy& copy() { return is_copy(), u_.copy; }
  const Copy& copy() const { return is_copy(), u_.copy; }
  Collective& coll() { return is(Kind::kCollective), u_.coll; }
  const Collective& coll() const { return is(Kind::kCollective), u_.coll; }
  SampleSpan& sample() { return is(Kind::kSample), u_.sample; }
  const SampleSpan& sample() const { return is(Kind::kSample), u_.sample; }
  BatchHandoff& handoff() { return is(Kind::kBatchHandoff), u_.handoff; }
  const BatchHandoff& handoff() const { return is(Kind::kBatchHandoff), u_.handoff; }
  ChannelHandoff& channel() { return is(Kind::kChannelHandoff), u_.channel; }
  const ChannelHandoff& channel() const { return is(Kind::kChannelHandoff), u_.channel; }
  LoaderConfig& loader() { return is(Kind::kLoaderConfig), u_.loader; }
  const LoaderConfig& loader() const { return is(Kind::kLoaderConfig), u_.loader; }
  StackSample& stack() { return is(Kind::kStackSample), u_.stack; }
  const StackSample& stack() const { return is(Kind::kStackSample), u_.stack; }
  // kCounter, kRange: the sampled or attached value.
  double& value() { return is_valued(), u_.value; }
  double value() const { return is_valued(), u_.value; }
  // Zeroes the payload (a converter reusing one Ev).
  void clear_payload() noexcept { u_ = Payload{}; }

 private:
  void is(Kind k) const noexcept { assert(kind == k); (void)k; }
  void is_work() const noexcept {
    assert(kind == Kind::kPreprocess || kind == Kind::kDataWait || kind == Kind::kBatchReady);
  }
  void is_copy() const noexcept {
    assert(kind == Kind::kH2D || kind == Kind::kD2H || kind == Kind::kD2D || kind == Kind::kMemset);
  }
  void is_valued() const noexcept { assert(kind == Kind::kCounter || kind == Kind::kRange); }
  union Payload {
    uint64_t raw[6] = {};  // zero-initialized: every payload starts at 0
    StorageRead io;
    StepMark step;
    Work work;
    Copy copy;
    Collective coll;
    SampleSpan sample;
    LoaderConfig loader;
    BatchHandoff handoff;
    ChannelHandoff channel;
    StackSample stack;
    double value;
  } u_;
};
static_assert(sizeof(Ev) <= 88, "Ev is copied per event: keep it small");
static_assert(std::is_trivially_copyable_v<Ev>);

// Facts a run did not measure but a probe recorded (process metadata or
// attachments; docs/report-guide.md "Probes"). Negative or empty = absent.
struct StorageProbePoint {
  double queue_depth = 0;
  double read_bytes = 0;
  double bytes_per_s = 0;
};
// A GPU of the host, from the "topology" attachment (docs/gpu.md).
struct GpuLink {
  int index = -1;         // NVML index (-1 unknown)
  std::string name, bus_id;
  int pcie_gen = 0, pcie_width = 0;  // maximum generation and width (NVML), 0 unknown
  double gbps = 0;        // H2D link bandwidth per direction, GB/s (0 unknown)
  bool from_max = false;  // gbps from the maximum gen × width; false: hwloc's current link
  int numa = -1;          // local NUMA node (-1 unknown)
  std::string cpus;       // local CPUs, "0-7,16-23"
  std::string uuid;       // NVML's "GPU-…" ("" unknown)
  int nvlinks_active = 0; // active NVLink links (NVML), to GPUs or NVSwitches
};
// A CUDA device a process of the rank ran work on (attachment "cuda.device",
// written by the CUPTI source).
struct RankDevice {
  int id = -1;       // CUDA ordinal in that process
  std::string uuid;  // "GPU-…", "" when CUPTI gave none
  std::string name;
};
struct Probes {
  std::vector<StorageProbePoint> storage;  // the loader's storage probe
  std::string storage_tier;                // tier the probe read from
  double local_bytes_per_s = -1;           // a local-NVMe read rate (topology probe)
  double pinned_gbps = -1, pageable_gbps = -1;  // emulated-device model or topology probe
  // Loader configuration of the run (metadata "loader"), -1 = unknown.
  double workers = -1, prefetch_batches = -1, queue_depth = -1, read_size = -1;
  int pinned = -1;
  int64_t ranks_on_node = 0;  // ranks sharing this host (0 = unknown: count input files)
  int64_t sample_period_ns = 0;
  std::vector<GpuLink> gpus;          // the host's GPUs (attachment "topology"), empty = none recorded
  std::vector<RankDevice> devices;    // the GPUs this rank ran work on (attachments "cuda.device")
  int host_numa_nodes = 0;            // NUMA nodes of the host (topology; 0 unknown)
  std::vector<std::string> warnings;  // malformed probe attachments, each naming file and attachment
};

// What the trainer thread was doing over a span of time, as far as a trace
// tells (RankTrace::trainer_spans, and the ranges, API calls, syncs and
// stack samples the engine gathers from events): the host gaps' activities
// (docs/report-guide.md "Host gaps").
enum class ActivityKind : uint8_t {
  kAnnotation,   // a user or NVTX range, a record_function annotation
  kPython,       // a Python frame (profiler python_function)
  kOperator,     // a CPU operator (profiler cpu_op, the autograd profiler's events)
  kApiCall,      // a CUDA runtime or driver call
  kSync,         // a blocking synchronization call
  kStackSample,  // a Python stack sample: its innermost frame over its interval
};
struct HostActivity {
  int64_t a = 0, b = 0;  // [a, b) ns
  uint32_t name = 0;     // RankTrace::names id
  ActivityKind kind = ActivityKind::kOperator;
};

// What produced a rank's events.
enum class TraceOrigin : uint8_t {
  kRecorder,        // stallscope's recorder (.sst files, or built in memory)
  kProfilerImport,  // a PyTorch profiler trace: no DataLoader workers, no CPU samples
};

// Everything one rank recorded, in memory (tests, small inputs).
// What a profiler import found that its events do not say (a RankTrace of
// origin kProfilerImport; empty otherwise).
struct ImportFacts {
  std::string summary;                 // "PyTorch profiler trace (Kineto): N events; …"
  std::vector<std::string> warnings;   // the importer's own
  uint64_t profiler_steps = 0;         // ProfilerStep#N ranges
  bool single_process_loader = false;  // every data wait in _SingleProcessDataLoaderIter.__next__
  // Without ProfilerStep#N: how the importer inferred the steps (kInferred,
  // kWholeTrace; kNone when the trace marks steps or holds no activity).
  StepSource step_source = StepSource::kNone;
  std::string step_detail;
};

struct RankTrace {
  int64_t rank = -1;
  TraceOrigin origin = TraceOrigin::kRecorder;
  ImportFacts imported;
  std::vector<ProcessDesc> procs;
  std::vector<TrackDesc> tracks;
  std::vector<std::string> names = {""};  // names[0] = none
  std::vector<uint64_t> ids;              // pool for Work::ids_at / ids_n
  // Files read, rank-scoped: StorageRead::file indexes it (files[0] = unknown).
  // A rank's processes each write their own trace, each with its own string
  // ids; one path is one id here. At most kMaxFiles; later paths share
  // kManyFiles.
  std::vector<std::string> files = {""};
  static constexpr uint32_t kMaxFiles = 1u << 16;
  static constexpr uint32_t kManyFiles = ~0u;
  std::vector<Ev> events;
  Probes probes;
  // CPU operators of the trainer thread, as the union of their spans
  // (sorted, disjoint [start, end) ns); empty = not recorded. Only a
  // profiler trace has them: a rank without device activity counts the time
  // inside them as compute, the gaps between them as host on-CPU.
  std::vector<std::pair<int64_t, int64_t>> trainer_ops;
  // The same operators and the trainer's Python frames one by one, sorted
  // by start (a profiler trace's; the engine gets a recording's ranges, API
  // calls and stack samples as events): what the host did in its gaps.
  std::vector<HostActivity> trainer_spans;

  uint32_t name_id(const std::string& n);  // interns n
  // Appends a batch_ready at `at` for `batch` holding `samples`.
  void add_batch_ready(uint32_t track, int64_t at, uint64_t batch,
                       const std::vector<uint64_t>& samples);
};

}  // namespace stallscope::analyzer
