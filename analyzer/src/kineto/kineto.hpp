// PyTorch profiler (Kineto) traces in: one Chrome-trace JSON file (plain or
// gzip) becomes one rank's in-memory events (RankTrace), which the normal
// analysis (analyze_rank) attributes; docs/kineto-import.md lists the fields
// used and how.
//
//   auto imp = kineto::import_file("rank0.pt.trace.json.gz");  // throws ImportError
//   RankReport r = analyze_imported(imp, opt);  // the engine's, in input.cpp
//
// Input detection is by content (kineto::sniff), never by file name, so
// stallscope's own .sst files and PyTorch traces can be passed together.
// A file streams through a window of a few MiB while it is parsed (gzip
// inflated on the way); its events are kept as compact Ev records, so what
// an import costs follows its events, not its text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/analyzer/analyzer.hpp"

namespace stallscope::analyzer::kineto {

// A file that cannot be imported; what() names the file and the byte
// offset (of the decompressed JSON) or the field that was wrong.
class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which writer produced the file (all are read by one mapping).
enum class Schema : uint8_t {
  kKineto,    // current: schemaVersion, lowercase categories (cpu_op, kernel, gpu_memcpy …)
  kLegacy,    // older Kineto: Operator, Runtime, Kernel, Memcpy, tid "stream N"
  kAutograd,  // the autograd profiler without Kineto: no "cat", pid "CPU functions"
};
std::string_view schema_name(Schema s) noexcept;

// What the importer counted while mapping (shown in notes and tests).
struct ImportStats {
  uint64_t events = 0;  // trace events seen
  uint64_t kept = 0;    // mapped to analyzer events
  uint64_t inferred_steps = 0;  // step events the importer inferred (no ProfilerStep#N)
  uint64_t steps = 0, data_waits = 0, kernels = 0, collectives = 0, copies = 0, api_calls = 0,
           syncs = 0;
  // Of the data waits, those in _SingleProcessDataLoaderIter.__next__: a
  // DataLoader with num_workers=0, loading on the trainer thread.
  uint64_t single_process_waits = 0;
  uint64_t skipped = 0;    // unusable events (missing ts/dur …)
  uint64_t implausible_sizes = 0;  // collectives whose message size is impossible: no bytes
  std::string first_implausible;   // the first one's size, with its byte offset
  std::string first_skip;  // why the first one was skipped, with its byte offset
};

// One PyTorch profiler file as one rank.
struct ImportedRank {
  RankTrace trace;         // times: ns of the file's clock (ts × 1000)
  int64_t rank = -1;       // distributedInfo.rank; -1 when absent
  int64_t world_size = 0;  // distributedInfo.world_size; 0 when absent
  // Wall-clock ns (CLOCK_REALTIME) of trace time 0: baseTimeNanoseconds,
  // 0 when absent (older files: ts are already absolute µs).
  int64_t base_time_ns = 0;
  std::string file;
  Schema schema = Schema::kKineto;
  uint64_t json_bytes = 0;  // decompressed size
  ImportStats stats;
  std::vector<std::string> warnings;
  // A trace without ProfilerStep#N: how its steps were inferred (kInferred,
  // kWholeTrace; kNone when it marks steps or holds no activity at all).
  StepSource step_source = StepSource::kNone;
  std::string step_detail;
};

// True when `path` is a regular file whose content (after gunzip) is a
// PyTorch profiler trace: JSON opening with an object holding traceEvents
// or schemaVersion, or an array of trace events; stallscope's own Chrome
// export (otherData.generator "stallscope") is not.
bool sniff(const std::string& path);

// The most decompressed JSON a trace may have by default (report
// --max-json-mb raises it, to simdjson's 4 GiB).
inline constexpr uint64_t kDefaultMaxJsonBytes = uint64_t{2} << 30;

// The whole JSON text of `path`, gunzipped when it starts with the gzip
// magic, with simdjson's padding after size() (import_file does not need
// it: for tests and tools). Throws ImportError, also when the JSON passes
// `max_bytes` or a gzip inflates like a bomb (both found while streaming;
// the first buffer is at most what the bomb check lets through).
std::string read_json(const std::string& path, uint64_t max_bytes = kDefaultMaxJsonBytes);

// Parses and maps one file as it streams. Throws ImportError (malformed
// JSON, truncated gzip, no traceEvents …, with the byte offset);
// unusable single events are skipped, counted and named in `warnings`,
// invalid UTF-8 is replaced by U+FFFD with one warning.
ImportedRank import_file(const std::string& path, uint64_t max_bytes = kDefaultMaxJsonBytes);
// The same from JSON text already in memory.
ImportedRank import_json(std::string_view json, const std::string& name);

// The seam for the cross-rank pass: every PyTorch profiler trace among
// `paths` (files, or directories holding *.json / *.json.gz files), each
// imported as one rank with its rank id and wall-clock base. Files that
// fail go to `errors`. Paths holding no profiler trace are returned in
// `rest` for stallscope's own reader (a directory may feed both).
struct Imported {
  std::vector<ImportedRank> ranks;
  std::vector<std::string> errors;
  std::vector<std::string> rest;
};
Imported import_paths(const std::vector<std::string>& paths);

// The input hook of analyze_paths: each profiler trace among `paths`
// imported and handed to `fn` in turn (one file in memory at a time),
// failures to `errors`; returns the paths left for stallscope's own reader.
std::vector<std::string> import_each(const std::vector<std::string>& paths, uint64_t max_bytes,
                                     std::vector<std::string>& errors,
                                     const std::function<void(ImportedRank&&)>& fn);

}  // namespace stallscope::analyzer::kineto

namespace stallscope::analyzer {
// An imported rank analyzed by the engine, as a recording's rank is
// (input.cpp); the import's facts (RankTrace::imported) say what a profiler
// trace cannot: no loader lineage, no CPU samples, how its steps were found.
RankReport analyze_imported(const kineto::ImportedRank& r, const AnalyzeOptions& opt);
}  // namespace stallscope::analyzer
