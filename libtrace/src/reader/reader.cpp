// TraceReader: opening, header validation and the index pass over chunks.
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/checksum.hpp"
#include "reader/reader_impl.hpp"

namespace stallscope::reader {

namespace {

constexpr size_t kHeaderCrcBytes = offsetof(format::FileHeader, crc32);

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::all_of(b, b + n, [](uint8_t x) { return x == 0; });
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

// ------------------------------------------------------------- diagnostics --

bool TraceReader::Impl::fail(uint64_t offset, std::string_view what) {
  if (status == Status::kError) return false;  // keep the first error
  status = Status::kError;
  error = path + ": " + std::string(what) + " at offset " + std::to_string(offset);
  diagnostics.push_back({Diagnostic::Level::kError, error});
  stream.done = true;
  return false;
}

void TraceReader::Impl::warn(std::string message) {
  diagnostics.push_back({Diagnostic::Level::kWarning, path + ": " + std::move(message)});
}

// ------------------------------------------------------------------ header --

void TraceReader::Impl::open(std::span<const uint8_t>* memory) {
  std::string why;
  if (memory != nullptr) {
    file.open_memory(memory->data(), memory->size());
  } else if (!file.open(path, &why)) {
    status = Status::kError;
    error = path + ": cannot open: " + why;
    diagnostics.push_back({Diagnostic::Level::kError, error});
    return;
  }
  file_bytes = file.size();
  if (!read_header()) return;
  header_ok = true;
  index_chunks();
  extract_identity();
  reset_stream();
}

namespace {

// Why a file without the magic is none of ours, as far as its first bytes
// tell: the JSON and gzip files users pass by mistake get their own words.
std::string not_a_trace(std::string_view head) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (head.starts_with(kBom)) head.remove_prefix(kBom.size());
  const size_t i = head.find_first_not_of(" \t\r\n");
  if (i != std::string_view::npos && (head[i] == '{' || head[i] == '['))
    return "JSON without \"traceEvents\": not a PyTorch profiler trace (nor a stallscope trace)";
  if (head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f &&
      static_cast<uint8_t>(head[1]) == 0x8b)
    return "gzip data that is no PyTorch profiler trace (nor a stallscope trace)";
  return "not a stallscope trace (bad magic)";
}

}  // namespace

bool TraceReader::Impl::read_header() {
  if (file_bytes == 0) return fail(0, "empty file (0 bytes), not a stallscope trace");
  std::array<char, sizeof(format::FileHeader)> raw{};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(file_bytes, raw.size()));
  if (!file.read_at(0, raw.data(), n)) return fail(0, "read error in the file header");
  if (n < sizeof format::kMagic ||
      std::memcmp(raw.data(), format::kMagic, sizeof format::kMagic) != 0)
    return fail(0, not_a_trace(std::string_view(raw.data(), n)));
  if (n < raw.size())
    return fail(0, "file cut inside its header (" + std::to_string(n) + " of 96 bytes)");
  std::memcpy(&header, raw.data(), sizeof header);
  if (header.version_major > format::kVersionMajor)
    return fail(0, "written by a newer stallscope: format " + std::to_string(header.version_major) +
                       "." + std::to_string(header.version_minor) + ", this reader reads " +
                       std::to_string(format::kVersionMajor) + ".x");
  if (header.version_major < format::kVersionMajor)
    return fail(0, "unsupported format version " + std::to_string(header.version_major) + "." +
                       std::to_string(header.version_minor));
  const uint32_t crc = stallscope::detail::checksum(raw.data(), kHeaderCrcBytes);
  if (crc != header.crc32)
    return fail(0, "header checksum mismatch (stored " + hex32(header.crc32) + ", computed " +
                       hex32(crc) + ")");
  if (header.header_bytes < sizeof(format::FileHeader) || header.header_bytes > file_bytes)
    return fail(0, "header_bytes " + std::to_string(header.header_bytes) +
                       " is outside [96, file size " + std::to_string(file_bytes) + "]");
  first_chunk = header.header_bytes;
  set_nominal_rate();
  if (sane_triple(header.start))
    clock_points.emplace_back(header.start.mono_ns, header.start.real_ns - header.start.mono_ns);
  return true;
}

// Nominal ns per tick until two triples are known: 1e9 / tsc_hz for TSC files.
void TraceReader::Impl::set_nominal_rate() {
  if ((header.flags & format::kFileTicksAreNs) != 0) return;
  const double hz = static_cast<double>(header.tsc_hz);
  if (hz >= 1e6 && hz <= 1e12) {
    nominal_ns_per_tick = 1e9 / hz;
    return;
  }
  warn("implausible tsc_hz " + std::to_string(header.tsc_hz) +
       " in the header; times rely on the clock triples only");
}

// ------------------------------------------------------------- index pass --

ChunkRead TraceReader::Impl::read_chunk_header(uint64_t off, format::ChunkHeader& h,
                                               std::string& why) {
  if (off == file_bytes) return ChunkRead::kEof;
  if (file_bytes - off < sizeof h) return ChunkRead::kCut;
  if (!file.read_at(off, &h, sizeof h)) {
    why = "read error in a chunk header";
    return ChunkRead::kBad;
  }
  return check_chunk_header(off, h, why);
}

ChunkRead TraceReader::Impl::check_chunk_header(uint64_t off, const format::ChunkHeader& h,
                                                std::string& why) {
  // A recorder killed mid-write may leave a zero-filled tail: that is a cut,
  // not corruption.
  if (all_zero(&h, sizeof h)) return ChunkRead::kCut;
  if (h.magic != format::kChunkMagic) {
    why = "bad chunk magic " + hex32(h.magic);
    return ChunkRead::kBad;
  }
  if (h.payload_bytes > format::kMaxChunkPayload || h.payload_bytes % 8 != 0) {
    why = "chunk payload_bytes " + std::to_string(h.payload_bytes) +
          " (must be a multiple of 8 and at most " + std::to_string(format::kMaxChunkPayload) + ")";
    return ChunkRead::kBad;
  }
  if (file_bytes - off - sizeof h < h.payload_bytes) return ChunkRead::kCut;
  return ChunkRead::kOk;
}

bool TraceReader::Impl::read_payload(uint64_t off, const format::ChunkHeader& h,
                                     std::vector<uint8_t>& out) {
  out.resize(h.payload_bytes);  // bounded: checked against kMaxChunkPayload and the file size
  if (!file.read_at(off + sizeof h, out.data(), out.size()))
    return fail(off, "read error in a chunk payload");
  return payload_intact(off, h, out.data());
}

bool TraceReader::Impl::payload_intact(uint64_t off, const format::ChunkHeader& h,
                                       const uint8_t* payload) {
  const uint32_t crc = stallscope::detail::checksum(payload, h.payload_bytes);
  if (crc != h.payload_crc32)
    return fail(off, "chunk checksum mismatch (stored " + hex32(h.payload_crc32) + ", computed " +
                         hex32(crc) + ")");
  return true;
}

void TraceReader::Impl::index_chunks() {
  uint64_t off = first_chunk;
  uint64_t expected_seq = 0;
  bool seq_warned = false;
  valid_end = off;
  for (;;) {
    format::ChunkHeader h{};
    std::string why;
    const ChunkRead r = read_chunk_header(off, h, why);
    if (r == ChunkRead::kBad) {
      fail(off, why);
      break;
    }
    if (r == ChunkRead::kEof || r == ChunkRead::kCut) {
      lost_bytes = file_bytes - off;
      break;
    }
    if (h.seq != expected_seq && !seq_warned) {
      warn("chunk seq " + std::to_string(h.seq) + " where " + std::to_string(expected_seq) +
           " was expected at offset " + std::to_string(off) + " (chunks missing?)");
      seq_warned = true;
    }
    expected_seq = h.seq + 1;
    if (!index_one(off, h)) break;
    off += sizeof h + h.payload_bytes;
    valid_end = off;
    if (end.present) break;
  }
  finish_index();
}

// Complete or cut, with the warning that says what was lost.
void TraceReader::Impl::finish_index() {
  if (status == Status::kError) return;
  if (end.present) {
    status = Status::kComplete;
    if (valid_end < file_bytes)
      warn(std::to_string(file_bytes - valid_end) +
           " bytes after the End chunk ignored at offset " + std::to_string(valid_end));
    return;
  }
  status = Status::kTruncated;
  if (lost_bytes > 0) {
    warn("file cut: " + std::to_string(lost_bytes) +
         " bytes after the last complete chunk were lost at offset " + std::to_string(valid_end) +
         " (no End chunk)");
  } else {
    warn("no End chunk: the recording is still running or did not finish (killed?); all chunks up to offset " +
         std::to_string(valid_end) + " are complete");
  }
}

bool TraceReader::Impl::index_one(uint64_t off, const format::ChunkHeader& h) {
  const auto& t = h.clock;
  if (sane_triple(t) && (clock_points.empty() || t.mono_ns > clock_points.back().first))
    clock_points.emplace_back(t.mono_ns, t.real_ns - t.mono_ns);
  const auto type = static_cast<format::ChunkType>(h.type);
  if (type == format::ChunkType::kEvents) {
    event_payload_bytes += h.payload_bytes;
    return true;
  }
  if (type < format::ChunkType::kStrings || type > format::ChunkType::kEnd) {
    if (unknown_chunks++ == 0)
      warn("skipping chunks of unknown type " + std::to_string(h.type) + " (first at offset " +
           std::to_string(off) + "; written by a newer stallscope?)");
    return true;
  }
  const uint64_t poff = off + sizeof h;
  if ((type == format::ChunkType::kMetadata || type == format::ChunkType::kAttachment) &&
      !admit_kept_chunk(type, poff, h.payload_bytes))
    return true;
  std::vector<uint8_t> payload;
  if (!read_payload(off, h, payload)) return false;
  const std::span<const uint8_t> p(payload);
  switch (type) {
    case format::ChunkType::kStrings:
      return parse_strings(p, poff);
    case format::ChunkType::kTracks:
      return parse_tracks(p, poff);
    case format::ChunkType::kMetadata:
      parse_metadata(p, poff);
      return true;
    case format::ChunkType::kAttachment:
      return parse_attachment(p, poff);
    case format::ChunkType::kEnd:
      return parse_end(p, poff);
    default:
      return true;
  }
}

// ------------------------------------------------------------- public API --

TraceReader::TraceReader(std::string path) : impl_(std::make_unique<Impl>()) {
  impl_->path = std::move(path);
  try {
    impl_->open(nullptr);
  } catch (const std::bad_alloc&) {
    impl_->fail(0, "out of memory while opening");
  }
}

TraceReader::TraceReader(std::string name, std::span<const uint8_t> bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = std::move(name);
  try {
    impl_->open(&bytes);
  } catch (const std::bad_alloc&) {
    impl_->fail(0, "out of memory while opening");
  }
}

TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

bool TraceReader::next(Event& e) { return impl_->next(e, kAllExts); }
bool TraceReader::next(Event& e, uint32_t ext_wanted) { return impl_->next(e, ext_wanted); }
bool TraceReader::next(RecordView& v, uint32_t ext_wanted) { return impl_->next(v, ext_wanted); }
void TraceReader::rewind() { impl_->reset_stream(); }
const std::string& TraceReader::path() const noexcept { return impl_->path; }
Status TraceReader::status() const noexcept { return impl_->status; }
const std::string& TraceReader::error() const noexcept { return impl_->error; }
const std::vector<Diagnostic>& TraceReader::diagnostics() const noexcept {
  return impl_->diagnostics;
}
bool TraceReader::header_valid() const noexcept { return impl_->header_ok; }
const format::FileHeader& TraceReader::header() const noexcept { return impl_->header; }
uint64_t TraceReader::file_bytes() const noexcept { return impl_->file_bytes; }
uint64_t TraceReader::lost_bytes() const noexcept { return impl_->lost_bytes; }
uint64_t TraceReader::event_payload_bytes() const noexcept { return impl_->event_payload_bytes; }
std::string_view TraceReader::string(uint32_t id) const noexcept { return impl_->strings.get(id); }
const std::vector<TrackInfo>& TraceReader::tracks() const noexcept { return impl_->tracks; }

const TrackInfo* TraceReader::track(uint32_t track_id) const noexcept {
  auto it = impl_->track_index.find(track_id);
  return it == impl_->track_index.end() ? nullptr : &impl_->tracks[it->second];
}

const std::string& TraceReader::metadata_json() const noexcept { return impl_->metadata_text; }
const std::string& TraceReader::host() const noexcept { return impl_->host; }
int64_t TraceReader::rank() const noexcept { return impl_->rank; }
const std::vector<Attachment>& TraceReader::attachments() const noexcept {
  return impl_->attachments;
}
const EndTotals& TraceReader::end() const noexcept { return impl_->end; }

SkipCounts TraceReader::skipped() const noexcept {
  return {impl_->stream.unknown_kinds, impl_->stream.unknown_exts, impl_->unknown_chunks};
}

int64_t TraceReader::start_mono_ns() const noexcept { return impl_->header.start.mono_ns; }

int64_t TraceReader::to_real_ns(int64_t mono_ns) const noexcept {
  const auto& pts = impl_->clock_points;
  if (pts.empty()) return mono_ns;
  auto it = std::upper_bound(pts.begin(), pts.end(), mono_ns,
                             [](int64_t m, const auto& p) { return m < p.first; });
  if (it == pts.begin()) return mono_ns + pts.front().second;
  if (it == pts.end()) return mono_ns + pts.back().second;
  const auto& a = *(it - 1);
  const auto& b = *it;
  const double f = static_cast<double>(mono_ns - a.first) / static_cast<double>(b.first - a.first);
  const double off = static_cast<double>(a.second) + f * static_cast<double>(b.second - a.second);
  return mono_ns + static_cast<int64_t>(off);
}

std::string_view status_name(Status s) noexcept {
  switch (s) {
    case Status::kComplete:
      return "complete";
    case Status::kTruncated:
      return "cut";
    case Status::kError:
      return "error";
  }
  return "?";
}

std::string_view kind_name(uint8_t kind) noexcept {
  static constexpr std::array<std::string_view, 24> kNames = {
      "unknown",       "step",         "data_wait",       "storage_read",
      "preprocess",    "batch_ready",  "api_call",        "h2d",
      "d2h",           "d2d",          "memset",          "kernel",
      "collective",    "sync",         "range",           "counter",
      "capture",       "gap",          "mark",            "sample",
      "loader_config", "batch_handoff", "channel_handoff", "stack_sample"};
  static_assert(kNames.size() == static_cast<size_t>(format::Kind::kMaxKnown) + 1);
  return kind < kNames.size() ? kNames[kind] : kNames[0];
}

std::vector<std::string> list_trace_files(const std::string& path, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    // The system's reason (ELOOP, EACCES on a directory above, ENOENT …),
    // lower-cased to read as the rest of the line.
    std::string why = ec ? ec.message() : std::strerror(ENOENT);
    if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    *error = path + ": " + why;
    return {};
  }
  if (!fs::is_directory(st)) return {path};
  std::vector<std::string> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".sst" && it->is_regular_file(ec))
      files.push_back(it->path().string());
  }
  if (ec) {
    *error = path + ": cannot list directory: " + ec.message();
    return {};
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) *error = path + ": no *.sst trace files in this directory";
  return files;
}

}  // namespace stallscope::reader
