// stallscope trace reader — decodes trace files (format.hpp, version 1).
//
// Opening a file reads its header and its small tables (strings, tracks,
// metadata, attachments, the End chunk) and checks the chunk structure;
// events are then streamed one at a time, one chunk in memory, so memory
// stays bounded however large the file. Damaged input never crashes: the
// reader yields every event it can prove sound and says what was lost.
//
// Quickstart:
//
//   stallscope::reader::TraceReader r("run/host-r0-123.sst");
//   stallscope::reader::Event e;
//   while (r.next(e)) {
//     std::cout << r.string(e.name_id) << " " << e.ts_ns << " " << e.dur_ns << "\n";
//   }
//   if (r.status() == stallscope::reader::Status::kError) std::cerr << r.error() << "\n";
//   for (const auto& d : r.diagnostics()) std::cerr << d.message << "\n";
//
// Not thread-safe: use one TraceReader per thread (several may read one file).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/format.hpp"
#include "stallscope/trace.h"  // STALLSCOPE_API

namespace stallscope::reader {

// How much of a file could be read. Final once next() has returned false.
enum class Status : uint8_t {
  kComplete,   // End chunk seen, every chunk sound
  kTruncated,  // cut: ends inside a chunk or without an End chunk (a warning)
  kError,      // unreadable from some offset on (see error()); data before it is valid
};

// "complete", "cut" or "error".
STALLSCOPE_API std::string_view status_name(Status s) noexcept;

struct Diagnostic {
  enum class Level : uint8_t { kWarning, kError };
  Level level;
  std::string message;  // names the file and, where it applies, the byte offset
};

// Bit of Event::ext_mask that says extension `e` is present.
constexpr uint32_t ext_bit(format::Ext e) noexcept {
  return 1u << (static_cast<uint8_t>(e) - format::kExtBase);
}

// Every extension: the ext_wanted mask of a full decode.
inline constexpr uint32_t kAllExts = ~0u;

// One decoded record: the core fields with times in CLOCK_MONOTONIC ns of the
// recording host, plus copies of the typed extensions that followed it.
struct STALLSCOPE_API Event {
  uint8_t kind = 0;       // format::Kind value (always a known kind)
  uint8_t phase = 0;      // format::Phase
  uint8_t flags = 0;      // the record's whole flags byte (Phase | RecordFlags)
  uint16_t aux = 0;       // kind-specific small value
  uint32_t track_id = 0;  // TrackInfo::track_id of the block holding the record
  uint32_t name_id = 0;   // TraceReader::string(name_id)
  int64_t ts_ns = 0;      // start (or instant), monotonic ns
  int64_t dur_ns = 0;     // kComplete: duration in ns; 0 otherwise
  uint64_t ts_raw = 0;    // ts as stored (ticks, or ns with kTimesNs)
  uint64_t value = 0;     // as stored: dur ticks, counter value, gap count
  uint64_t corr = 0;      // correlation id (counter: subject tid/pid)
  uint64_t offset = 0;    // byte offset of the core record in the file
  // ext_bit() of each extension present (and wanted) below. Members whose
  // bit is clear hold stale values from an earlier record: check has().
  uint32_t ext_mask = 0;
  format::IoExt io{};
  format::WorkExt work{};
  format::CopyExt copy{};
  format::DeviceExt device{};
  format::CollectiveExt collective{};
  format::ApiExt api{};
  format::StepExt step{};
  format::RangeExt range{};
  format::SampleExt sample{};                 // format 1.1
  format::LoaderConfigExt loader_config{};
  format::BatchHandoffExt batch_handoff{};
  format::ChannelHandoffExt channel_handoff{};
  format::StackSampleExt stack_sample{};
  // Ids of every IdList extension of the record, concatenated. Points into
  // the reader: valid until its next call to next().
  std::span<const uint64_t> ids;
  // The frames (string ids, innermost first) of the record's StackSample
  // extension; empty without one. Valid until the reader's next call.
  std::span<const uint32_t> frames;
  // The `requested` time of a BatchHandoff (else ChannelHandoff) extension
  // in monotonic ns, converted as ts_ns is; 0 when unknown or absent.
  int64_t requested_ns = 0;

  format::Kind kind_enum() const noexcept { return static_cast<format::Kind>(kind); }
  bool has(format::Ext e) const noexcept { return (ext_mask & ext_bit(e)) != 0; }
  bool async() const noexcept { return (flags & format::kAsync) != 0; }
  int64_t end_ns() const noexcept { return ts_ns + dur_ns; }
  // Counter value as a double (honours kValueDouble).
  double number() const noexcept;
};

// Extension types this reader knows (format 1.1: Io … StackSample): slots
// of RecordView::ext.
inline constexpr size_t kExtTypes = 14;

// One record as it lies in the reader's buffer, checked as next() checks
// it and with its times converted, for readers that load only the fields
// they use: nothing is copied. The pointers and `ids` are valid until the
// reader's next call.
struct RecordView {
  uint8_t kind = 0;       // format::Kind value (always a known kind)
  uint8_t phase = 0;      // format::Phase
  uint8_t flags = 0;      // the record's whole flags byte
  uint32_t track_id = 0;  // TrackInfo::track_id of the block holding the record
  int64_t ts_ns = 0;      // as Event::ts_ns
  int64_t dur_ns = 0;     // as Event::dur_ns
  uint64_t offset = 0;    // byte offset of the core record in the file
  const uint8_t* core = nullptr;  // the format::CoreRecord (32 bytes)
  // ext_bit() of each extension present (and wanted); ext[type - kExtBase]
  // points to the last one of its type (its ExtHeader), at least as long
  // as format 1 defines it (IdList: the ids of all of them are in `ids`;
  // StackSample: the frames of the last one are in `frames`).
  // Slots whose bit is clear are stale.
  uint32_t ext_mask = 0;
  const uint8_t* ext[kExtTypes] = {};
  std::span<const uint64_t> ids;  // as Event::ids
  // As Event::frames and Event::requested_ns, but stale (like ext slots)
  // unless has(Ext::kStackSample), resp. a BatchHandoff or ChannelHandoff.
  std::span<const uint32_t> frames;
  int64_t requested_ns = 0;

  bool has(format::Ext e) const noexcept { return (ext_mask & ext_bit(e)) != 0; }
  // A field of the core record, e.g. core_field<uint64_t>(offsetof(format::CoreRecord, corr)).
  template <typename T>
  T core_field(size_t at) const noexcept {
    T v;
    std::memcpy(&v, core + at, sizeof v);
    return v;
  }
  // A field of extension `e` (has(e) must hold), e.g.
  // ext_field<uint64_t>(format::Ext::kIo, offsetof(format::IoExt, bytes)).
  template <typename T>
  T ext_field(format::Ext e, size_t at) const noexcept {
    T v;
    std::memcpy(&v, ext[static_cast<uint8_t>(e) - format::kExtBase] + at, sizeof v);
    return v;
  }
};

struct TrackInfo {
  uint32_t track_id = 0;
  format::TrackType type = format::TrackType::kThread;
  uint32_t tid = 0;           // OS thread id, or stream id for device tracks
  uint32_t device = 0;        // device ordinal for device tracks
  uint32_t name_id = 0;       // thread name string id, 0 = unnamed
  uint32_t parent_track = 0;  // 0 = none
};

struct Attachment {
  std::string name;
  std::string data;  // raw bytes
};

// The End chunk: present only in complete files.
struct EndTotals {
  bool present = false;
  format::EndSummary summary{};
  std::vector<format::TrackTotals> tracks;
};

// Records, extensions and chunks skipped because this reader does not know
// their type (written by a newer stallscope).
struct SkipCounts {
  uint64_t unknown_kinds = 0;
  uint64_t unknown_exts = 0;
  uint64_t unknown_chunks = 0;
};

// "step", "data_wait", "storage_read" … (static storage); "unknown" for
// values this reader does not know.
STALLSCOPE_API std::string_view kind_name(uint8_t kind) noexcept;

// Reads one trace file. Opening never throws for bad input: check status().
class STALLSCOPE_API TraceReader {
 public:
  // Opens `path`, reads the header and tables. I/O errors and bad input set
  // status() to kError with error() naming the file and offset.
  explicit TraceReader(std::string path);
  // Reads a trace held in memory; `name` stands for the path in messages.
  // The bytes are not copied and must outlive the reader.
  TraceReader(std::string name, std::span<const uint8_t> bytes);
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Decodes the next event of a known kind into `e`; false at the end of the
  // readable data or on an error (then status() is final). No allocation per
  // event once warm; `e.ids` stays valid until the next call.
  bool next(Event& e);
  // As next(e), but decodes only the extensions in `ext_wanted` (a mask of
  // ext_bit()s): the others are validated and skipped without being copied,
  // and their ext_mask bits stay clear. For readers that need few of them.
  bool next(Event& e, uint32_t ext_wanted);
  // As next(e, ext_wanted), into a view of the record in place.
  bool next(RecordView& v, uint32_t ext_wanted);
  // Restarts event streaming from the first chunk (clock state reset too).
  void rewind();

  const std::string& path() const noexcept;
  Status status() const noexcept;
  // The first error ("" when none): "<file>: <what> at offset <n>".
  const std::string& error() const noexcept;
  // Warnings and the error, in the order found.
  const std::vector<Diagnostic>& diagnostics() const noexcept;

  // True when the header passed validation; header() is meaningful only then.
  bool header_valid() const noexcept;
  const format::FileHeader& header() const noexcept;
  uint64_t file_bytes() const noexcept;  // size of the file when opened
  // Bytes after the last complete chunk that could not be used (cut files).
  uint64_t lost_bytes() const noexcept;
  // Sum of events-chunk payload sizes (a size estimate for exporters).
  uint64_t event_payload_bytes() const noexcept;

  // Interned string by id; "" for 0 or an id the file never defined.
  std::string_view string(uint32_t id) const noexcept;
  const std::vector<TrackInfo>& tracks() const noexcept;
  // nullptr when the file has no such track.
  const TrackInfo* track(uint32_t track_id) const noexcept;

  // Metadata chunks merged into one JSON object ("{}" when none or invalid).
  const std::string& metadata_json() const noexcept;
  // Value at an RFC 6901 pointer ("/host"): strings unquoted, other values
  // as JSON text; nullopt when absent.
  std::optional<std::string> metadata_value(std::string_view pointer) const;
  // Host and rank from the metadata ("" / -1 when not recorded).
  const std::string& host() const noexcept;
  int64_t rank() const noexcept;

  const std::vector<Attachment>& attachments() const noexcept;
  const EndTotals& end() const noexcept;
  SkipCounts skipped() const noexcept;

  // CLOCK_REALTIME ns for a monotonic ns of this file (piecewise between the
  // file's clock triples).
  int64_t to_real_ns(int64_t mono_ns) const noexcept;
  // Monotonic ns of the recorder start (the header's start triple).
  int64_t start_mono_ns() const noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The trace files named by `path`: the file itself, or the *.sst files of a
// directory (not recursive), sorted. Empty with `*error` set when there are none.
STALLSCOPE_API std::vector<std::string> list_trace_files(const std::string& path,
                                                         std::string* error);

}  // namespace stallscope::reader
