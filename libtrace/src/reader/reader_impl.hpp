// Private state of TraceReader, shared by reader.cpp (open, index pass),
// tables.cpp (strings, tracks, metadata, attachments, End) and
// event_stream.cpp (event decoding).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reader/file_io.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::reader {

// Bounds on converted times: a corrupt triple or tick count saturates here
// instead of overflowing (ts + dur and differences of two times stay in int64).
inline constexpr int64_t kMaxAbsNs = int64_t{1} << 61;
inline constexpr int64_t kMaxTripleMonoNs = int64_t{1} << 60;

// Triples outside these bounds (corrupt) are ignored by the clock math.
inline bool sane_triple(const format::ClockTriple& t) noexcept {
  return t.mono_ns >= -kMaxTripleMonoNs && t.mono_ns <= kMaxTripleMonoNs &&
         t.real_ns >= -kMaxAbsNs && t.real_ns <= kMaxAbsNs;
}

// What a file's metadata and attachments may keep in memory, in all (the
// recorder writes some KiB of each); chunks past it are skipped unread.
inline constexpr uint64_t kMaxMetadataBytes = uint64_t{4} << 20;
inline constexpr uint64_t kMaxAttachmentBytes = uint64_t{16} << 20;

// Interned strings by id. Dense ids (the recorder's 1, 2, 3 …) go to a
// vector; others to a map, so a corrupt id never sizes an allocation.
class StringTable {
 public:
  void add(uint32_t id, std::string_view s);
  std::string_view get(uint32_t id) const noexcept;
  size_t size() const noexcept { return count_; }

 private:
  std::vector<std::string> dense_;
  std::vector<bool> dense_set_;
  std::unordered_map<uint32_t, std::string> sparse_;
  size_t count_ = 0;
};

// The fields of a core record that the time conversion reads.
struct RecordHead {
  uint8_t kind, flags;
  uint64_t ts, value;
};

// Result of reading one chunk header.
enum class ChunkRead : uint8_t { kOk, kEof, kCut, kBad };

// Event streaming state: one chunk payload in memory, a cursor into it.
struct Stream {
  uint64_t next_chunk = 0;   // file offset of the next chunk header
  // The header of the chunk at ahead_off, read with the previous payload
  // (one read instead of two per chunk); ahead_off = UINT64_MAX: none.
  uint64_t ahead_off = UINT64_MAX;
  format::ChunkHeader ahead{};
  std::vector<uint8_t> buf;  // current events payload (capacity reused)
  uint64_t payload_off = 0;  // file offset of buf[0]
  size_t size = 0;           // bytes of buf in use
  size_t pos = 0;            // next byte to decode
  size_t block_end = 0;      // end of the current track block
  uint32_t track_id = 0;
  TickConverter conv;
  // The newest pieces of conv's mapping, converted inline (nearly every
  // tick of a chunk falls in one of them); the rest go through conv.
  TickConverter::Segment seg[2];
  int nseg = 0;
  // Ticks of seg[k] that are also within max_tick_delta of cur_ticks
  // (inclusive; empty when lo > hi): they convert without any clamping.
  uint64_t fast_lo[2] = {1, 1}, fast_hi[2] = {0, 0};
  bool have_triple = false;
  uint64_t cur_ticks = 0;      // ticks of the converter's newest triple
  int64_t max_tick_delta = 0;  // |t - cur_ticks| that converts without overflow
  std::vector<uint64_t> ids;   // concatenated IdList ids of the current event
  std::vector<uint32_t> frames;  // the frames of the last StackSample read
  RecordView view;             // next(Event&): the record before it is copied
  uint32_t ext_wanted = kAllExts;  // of the next() call in progress
  uint64_t unknown_kinds = 0;
  uint64_t unknown_exts = 0;
  uint64_t clamped_times = 0;
  bool done = false;
  bool finished_once = false;
};

struct TraceReader::Impl {
  std::string path;
  detail::File file;
  Status status = Status::kTruncated;
  bool header_ok = false;
  std::string error;
  std::vector<Diagnostic> diagnostics;

  format::FileHeader header{};
  uint64_t file_bytes = 0;
  uint64_t lost_bytes = 0;
  uint64_t event_payload_bytes = 0;
  uint64_t first_chunk = 0;  // offset of the first chunk (header_bytes)
  uint64_t valid_end = 0;    // end of the chunks the index pass accepted
  double nominal_ns_per_tick = 1.0;

  StringTable strings;
  std::vector<TrackInfo> tracks;
  std::unordered_map<uint32_t, size_t> track_index;
  nlohmann::json metadata = nlohmann::json::object();
  std::string metadata_text = "{}";
  std::string host;
  int64_t rank = -1;
  std::vector<Attachment> attachments;
  uint64_t metadata_bytes = 0;    // of the metadata chunks admitted
  uint64_t attachment_bytes = 0;  // of the attachment chunks admitted
  uint64_t skipped_attachments = 0;
  EndTotals end;
  uint64_t unknown_chunks = 0;
  std::vector<std::pair<int64_t, int64_t>> clock_points;  // (mono, real - mono)

  Stream stream;

  // ---- reader.cpp
  void open(std::span<const uint8_t>* memory);  // nullptr: the file at `path`
  bool read_header();
  void set_nominal_rate();
  void index_chunks();
  void finish_index();
  bool index_one(uint64_t off, const format::ChunkHeader& h);
  ChunkRead read_chunk_header(uint64_t off, format::ChunkHeader& h, std::string& why);
  // The checks of read_chunk_header on a header already read from `off`.
  ChunkRead check_chunk_header(uint64_t off, const format::ChunkHeader& h, std::string& why);
  bool read_payload(uint64_t off, const format::ChunkHeader& h, std::vector<uint8_t>& out);
  // Checks the payload's CRC against the header's; false (and fail()) if not.
  bool payload_intact(uint64_t off, const format::ChunkHeader& h, const uint8_t* payload);
  bool fail(uint64_t offset, std::string_view what);
  void warn(std::string message);

  // ---- tables.cpp
  bool parse_strings(std::span<const uint8_t> p, uint64_t off);
  bool parse_tracks(std::span<const uint8_t> p, uint64_t off);
  // False (and a warning) when a metadata or attachment chunk of `bytes`
  // at payload offset `off` would pass the file's budget for it.
  bool admit_kept_chunk(format::ChunkType type, uint64_t off, uint32_t bytes);
  void parse_metadata(std::span<const uint8_t> p, uint64_t off);
  bool parse_attachment(std::span<const uint8_t> p, uint64_t off);
  bool parse_end(std::span<const uint8_t> p, uint64_t off);
  void extract_identity();

  // ---- event_stream.cpp
  void reset_stream();
  // Records are decoded into views; an Event is filled from the view.
  bool next(RecordView& v, uint32_t ext_wanted);
  bool next(Event& e, uint32_t ext_wanted);
  void add_triple(const format::ClockTriple& t);
  void update_tick_limit();
  void cache_segments();
  void refresh_fast_ranges();
  int64_t mono_of(uint64_t ticks) const noexcept {
    for (int k = 0; k < stream.nseg; ++k)
      if (ticks >= stream.seg[k].from && ticks < stream.seg[k].to) return stream.seg[k].convert(ticks);
    return stream.conv.to_mono_ns(ticks);
  }
  bool load_next_events_chunk();
  bool open_block();
  int decode_record(RecordView& v);  // 1 event, 0 skipped, -1 error
  // The per-record work, inlined into decode_record (event_stream.cpp only);
  // the messages of malformed records are built out of line (cold).
  [[gnu::always_inline]] inline bool read_ext(RecordView& v, bool known);
  [[gnu::always_inline]] inline bool apply_ext(RecordView& v, const format::ExtHeader& h,
                                               const uint8_t* p, uint64_t off);
  [[gnu::always_inline]] inline void fill_times(RecordView& v, const RecordHead& c);
  [[gnu::always_inline]] inline int64_t ticks_to_ns(uint64_t ticks);
  [[gnu::cold, gnu::noinline]] bool fail_ext_size(uint64_t off, uint16_t bytes, bool past_block);
  [[gnu::cold, gnu::noinline]] bool fail_id_list(uint64_t off, uint32_t ids, uint64_t fit);
  [[gnu::cold, gnu::noinline]] bool fail_short_ext(uint64_t off, uint8_t type, uint16_t bytes);
  [[gnu::cold, gnu::noinline]] bool fail_frames(uint64_t off, uint32_t frames, uint64_t fit);
  // A StackSample extension: frame count checked, frames copied when wanted.
  bool apply_stack_sample(RecordView& v, const format::ExtHeader& h, const uint8_t* p,
                          uint64_t off, bool wanted);
  // RecordView::frames and requested_ns of a record with a stack sample or
  // a hand-off extension.
  [[gnu::cold, gnu::noinline]] void view_pipeline_fields(RecordView& v, uint8_t flags);
  int64_t requested_ns(const RecordView& v, uint8_t flags);
  void finish_stream();
};

}  // namespace stallscope::reader
