// stallscope analyzer — the event model the analysis core consumes.
//
// The analyzer turns each decoded trace record (reader::Event) into a compact
// `Ev` on a rank-local track; the core never sees files, so tests can feed it
// a plain vector of events:
//
//   stallscope::analyzer::RankTrace t;
//   t.tracks = {{.proc = 0, .type = TrackType::kThread, .tid = 100}};
//   t.events.push_back(Ev::span(Kind::kStep, 0, 0, 10'000'000).with_corr(1));
//   auto result = stallscope::analyzer::analyze_rank(t, {});
//
// Times are int64 nanoseconds of one monotonic clock per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

// One track of a rank: a host thread, a device stream, a process track.
struct TrackDesc {
  uint32_t proc = 0;  // index into RankTrace::procs
  TrackType type = TrackType::kThread;
  uint32_t tid = 0;     // OS thread id, or stream id
  uint32_t device = 0;  // device ordinal for device tracks
  std::string name;     // thread name
};

// A decoded event, compact. Fields not meaningful for a kind stay 0.
struct Ev {
  Kind kind = Kind::kMark;
  uint8_t phase = format::kComplete;  // format::Phase
  bool emulated = false;              // kEmulated flag
  uint8_t tier = 0;                   // storage_read: format::Tier
  uint8_t cache = 0;                  // storage_read: format::Cache
  uint8_t src = 0, dst = 0;           // copies: format::MemKind
  uint8_t cache_method = 0;           // storage_read: format::CacheMethod
  uint16_t queue_depth = 0;           // storage_read
  bool enqueued = false;              // collective: a host-side enqueue (kCollEnqueued)
  bool join_only = false;             // collective: the shim's call span beside the plugin's (kCollJoinOnly)
  uint32_t track = 0;                 // index into RankTrace::tracks
  uint32_t name = 0;                  // index into RankTrace::names (0 = none)
  uint32_t worker = 0;                // preprocess: WorkExt worker; collective: op (format::CollOp)
  uint32_t count = 0;                 // preprocess: samples covered; collective: rank count
  int64_t start = 0, end = 0;         // ns; end == start for instants and begin/end marks
  uint64_t corr = 0;                  // step index, batch id, counter subject …
  uint64_t sample_id = 0;             // storage_read, preprocess; collective: communicator id
  uint64_t batch_id = 0;              // preprocess, data_wait, batch_ready; collective: sequence number
  uint64_t bytes = 0;                 // storage_read, copies, collectives
  uint64_t queued_ns = 0;             // storage_read: wait for submission
  uint64_t file = 0;                  // storage_read: file name id (reader string id)
  double value = 0;                   // counter value
  uint32_t ids_at = 0, ids_n = 0;     // batch_ready sample ids in RankTrace::ids

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
};

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

// Everything one rank recorded, in memory (tests, small inputs).
struct RankTrace {
  int64_t rank = -1;
  std::vector<ProcessDesc> procs;
  std::vector<TrackDesc> tracks;
  std::vector<std::string> names = {""};  // names[0] = none
  std::vector<uint64_t> ids;              // pool for Ev::ids_at / ids_n
  std::vector<Ev> events;
  Probes probes;

  uint32_t name_id(const std::string& n);  // interns n
  // Appends a batch_ready at `at` for `batch` holding `samples`.
  void add_batch_ready(uint32_t track, int64_t at, uint64_t batch,
                       const std::vector<uint64_t>& samples);
};

}  // namespace stallscope::analyzer
