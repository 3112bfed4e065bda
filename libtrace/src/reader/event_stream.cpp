// Event streaming: one events chunk in memory, records decoded with memcpy
// straight from it. Every length is checked against its container before
// anything is read; on malformed input the stream stops with an error that
// names the offset, after yielding every event before it.
#include <algorithm>
#include <iterator>
#include <cstddef>
#include <cstring>

#include "reader/reader_impl.hpp"

namespace stallscope::reader {

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

int64_t clamp_ns(int64_t v) { return std::clamp(v, -kMaxAbsNs, kMaxAbsNs); }

// Extensions whose `requested` time the reader converts, and those that
// fill RecordView fields of their own.
constexpr uint32_t kRequestedExts =
    ext_bit(format::Ext::kBatchHandoff) | ext_bit(format::Ext::kChannelHandoff);
constexpr uint32_t kViewedExts = kRequestedExts | ext_bit(format::Ext::kStackSample);

const char* ext_label(uint8_t type) {
  static constexpr const char* kLabels[] = {
      "io",    "work",   "id_list",       "copy",          "device",          "collective",
      "api",   "step",   "range",         "sample",        "loader_config",   "batch_handoff",
      "channel_handoff", "stack_sample"};
  static_assert(std::size(kLabels) == kExtTypes);
  return kLabels[type - format::kExtBase];
}

}  // namespace

// ------------------------------------------------------------------ clocks --

void TraceReader::Impl::reset_stream() {
  Stream& s = stream;
  const bool ticks_ns = (header.flags & format::kFileTicksAreNs) != 0;
  s.conv = TickConverter(ticks_ns, ticks_ns ? 1.0 : nominal_ns_per_tick);
  s.have_triple = false;
  cache_segments();
  s.next_chunk = first_chunk;
  s.ahead_off = UINT64_MAX;
  s.size = s.pos = s.block_end = 0;
  s.unknown_kinds = s.unknown_exts = s.clamped_times = 0;
  s.done = !header_ok || (status == Status::kError && valid_end <= first_chunk);
  update_tick_limit();
  if (header_ok) add_triple(header.start);
}

// Ticks this far from the newest triple (or durations this long) still
// convert to within ±2^60 ns: beyond it the double-to-int cast would overflow.
void TraceReader::Impl::update_tick_limit() {
  const double limit = static_cast<double>(kMaxTripleMonoNs) / stream.conv.ns_per_tick();
  stream.max_tick_delta =
      limit >= 4e18 ? int64_t{4000000000000000000} : static_cast<int64_t>(limit);
  refresh_fast_ranges();
}

void TraceReader::Impl::refresh_fast_ranges() {
  Stream& s = stream;
  const auto max = static_cast<uint64_t>(s.max_tick_delta);
  const uint64_t lo = s.cur_ticks >= max ? s.cur_ticks - max : 0;
  const uint64_t hi = s.cur_ticks > ~uint64_t{0} - max ? ~uint64_t{0} : s.cur_ticks + max;
  for (int k = 0; k < 2; ++k) {
    s.fast_lo[k] = 1;
    s.fast_hi[k] = 0;
    if (!s.have_triple || k >= s.nseg || s.seg[k].to == 0) continue;
    s.fast_lo[k] = std::max(s.seg[k].from, lo);
    s.fast_hi[k] = std::min(s.seg[k].to - 1, hi);
  }
}

void TraceReader::Impl::add_triple(const format::ClockTriple& t) {
  Stream& s = stream;
  if (!sane_triple(t)) return;
  if (s.have_triple && t.ticks <= s.cur_ticks) return;  // TickConverter ignores these too
  s.conv.add(t);
  s.have_triple = true;
  s.cur_ticks = t.ticks;
  update_tick_limit();
  cache_segments();
}

void TraceReader::Impl::cache_segments() {
  Stream& s = stream;
  s.nseg = 0;
  while (s.nseg < 2 && s.conv.segment(s.nseg, s.seg[s.nseg])) ++s.nseg;
  refresh_fast_ranges();
}

inline int64_t TraceReader::Impl::ticks_to_ns(uint64_t ticks) {
  Stream& s = stream;
  if (!s.have_triple) return clamp_ns(static_cast<int64_t>(ticks));
  const auto d = static_cast<int64_t>(ticks - s.cur_ticks);
  if (d > s.max_tick_delta || d < -s.max_tick_delta) {
    ++s.clamped_times;
    return d > 0 ? kMaxAbsNs : -kMaxAbsNs;
  }
  return clamp_ns(mono_of(ticks));
}

inline void TraceReader::Impl::fill_times(RecordView& e, const RecordHead& c) {
  using format::Kind;
  const bool has_dur = e.phase == format::kComplete &&
                       c.kind != static_cast<uint8_t>(Kind::kCounter) &&
                       c.kind != static_cast<uint8_t>(Kind::kGap);
  if ((c.flags & format::kTimesNs) != 0) {
    e.ts_ns = clamp_ns(static_cast<int64_t>(c.ts));
    e.dur_ns = has_dur ? static_cast<int64_t>(std::min<uint64_t>(c.value, kMaxAbsNs)) : 0;
    return;
  }
  // Nearly every tick of a chunk falls in a cached segment, within the
  // range that needs no clamping: one conversion for the start, one for
  // the end, and the same results as the general path below.
  for (int k = 0; k < 2; ++k) {
    if (c.ts < stream.fast_lo[k] || c.ts > stream.fast_hi[k]) continue;
    const TickConverter::Segment& g = stream.seg[k];
    const int64_t start = g.convert(c.ts);
    e.ts_ns = clamp_ns(start);
    e.dur_ns = 0;
    if (!has_dur) return;
    const uint64_t last = c.ts + c.value;
    if (c.value > static_cast<uint64_t>(stream.max_tick_delta) || last < c.ts || last >= g.to)
      break;
    int64_t d = 0;
    if (__builtin_sub_overflow(g.convert(last), start, &d)) d = INT64_MAX;
    e.dur_ns = std::clamp<int64_t>(d, 0, kMaxAbsNs);
    return;
  }
  e.ts_ns = ticks_to_ns(c.ts);
  e.dur_ns = 0;
  if (!has_dur) return;
  if (c.value > static_cast<uint64_t>(stream.max_tick_delta)) {
    ++stream.clamped_times;
    e.dur_ns = kMaxAbsNs;
  } else {
    // As TickConverter::duration_ns, through the cached segments.
    int64_t d = 0;
    if (__builtin_sub_overflow(mono_of(c.ts + c.value), mono_of(c.ts), &d)) d = INT64_MAX;
    e.dur_ns = std::clamp<int64_t>(d, 0, kMaxAbsNs);
  }
}

// ------------------------------------------------------------------ chunks --

bool TraceReader::Impl::load_next_events_chunk() {
  Stream& s = stream;
  while (s.next_chunk < valid_end) {
    const uint64_t off = s.next_chunk;
    format::ChunkHeader h{};
    std::string why;
    // The index pass accepted this header; re-checking guards against a
    // file changed underneath us.
    ChunkRead r;
    if (off == s.ahead_off) {
      h = s.ahead;
      r = check_chunk_header(off, h, why);
    } else {
      r = read_chunk_header(off, h, why);
    }
    if (r != ChunkRead::kOk)
      return fail(off, why.empty() ? "chunk changed since the file was opened" : why);
    add_triple(h.clock);
    s.next_chunk = off + sizeof h + h.payload_bytes;
    if (static_cast<format::ChunkType>(h.type) != format::ChunkType::kEvents) continue;
    // The payload and, when there is one, the next chunk's header.
    const size_t ahead = valid_end >= s.next_chunk + sizeof h ? sizeof h : 0;
    s.buf.resize(h.payload_bytes + ahead);
    if (!file.read_at(off + sizeof h, s.buf.data(), s.buf.size()))
      return fail(off, "read error in a chunk payload");
    if (!payload_intact(off, h, s.buf.data())) return false;
    if (ahead != 0) {
      std::memcpy(&s.ahead, s.buf.data() + h.payload_bytes, sizeof h);
      s.ahead_off = s.next_chunk;
    }
    s.payload_off = off + sizeof h;
    s.size = h.payload_bytes;
    s.pos = s.block_end = 0;
    return true;
  }
  return false;
}

bool TraceReader::Impl::open_block() {
  Stream& s = stream;
  const uint64_t off = s.payload_off + s.pos;
  if (s.size - s.pos < sizeof(format::TrackBlock))
    return fail(off, "track block header runs past its chunk");
  const auto b = load<format::TrackBlock>(s.buf.data() + s.pos);
  const size_t room = s.size - s.pos - sizeof b;
  if (b.bytes % 8 != 0)
    return fail(off, "track block of " + std::to_string(b.bytes) + " bytes (not a multiple of 8)");
  if (b.bytes > room)
    return fail(off, "track block of " + std::to_string(b.bytes) + " bytes runs past its chunk (" +
                         std::to_string(room) + " bytes left)");
  s.pos += sizeof b;
  s.block_end = s.pos + b.bytes;
  s.track_id = b.track_id;
  return true;
}

// ----------------------------------------------------------------- records --

bool TraceReader::Impl::next(RecordView& e, uint32_t ext_wanted) {
  Stream& s = stream;
  s.ext_wanted = ext_wanted;
  while (!s.done) {
    if (s.pos < s.block_end) {
      const int r = decode_record(e);
      if (r > 0) return true;
      if (r < 0) break;
      continue;
    }
    if (s.pos < s.size) {
      if (!open_block()) break;
      continue;
    }
    if (!load_next_events_chunk()) break;
  }
  finish_stream();
  return false;
}

int TraceReader::Impl::decode_record(RecordView& e) {
  Stream& s = stream;
  const uint64_t off = s.payload_off + s.pos;
  if (s.buf[s.pos] >= format::kExtBase) {
    fail(off, "extension record without a core record before it");
    return -1;
  }
  if (s.block_end - s.pos < sizeof(format::CoreRecord)) {
    fail(off, "core record runs past its track block");
    return -1;
  }
  // Field by field into registers: a copy of the whole record through the
  // stack, read back at other widths, stalled store-to-load forwarding.
  // The other fields stay in place (RecordView::core).
  const uint8_t* p = s.buf.data() + s.pos;
  const RecordHead c{p[offsetof(format::CoreRecord, kind)], p[offsetof(format::CoreRecord, flags)],
                     load<uint64_t>(p + offsetof(format::CoreRecord, ts)),
                     load<uint64_t>(p + offsetof(format::CoreRecord, value))};
  s.pos += sizeof(format::CoreRecord);
  const bool known = c.kind != 0 && c.kind <= static_cast<uint8_t>(format::Kind::kMaxKnown);
  e.ext_mask = 0;
  s.ids.clear();
  while (s.pos < s.block_end && s.buf[s.pos] >= format::kExtBase) {
    if (!read_ext(e, known)) return -1;
  }
  if (!known) {
    ++s.unknown_kinds;
    return 0;
  }
  e.kind = c.kind;
  e.flags = c.flags;
  e.phase = c.flags & format::kPhaseMask;
  e.track_id = s.track_id;
  e.offset = off;
  e.core = p;
  e.ids = std::span<const uint64_t>(s.ids.data(), s.ids.size());
  // Only records that have them pay for the frames and the requested time.
  if ((e.ext_mask & kViewedExts) != 0) [[unlikely]]
    view_pipeline_fields(e, c.flags);
  fill_times(e, c);
  return 1;
}

// The view's record copied out: core fields, times and each extension present.
bool TraceReader::Impl::next(Event& e, uint32_t ext_wanted) {
  RecordView& v = stream.view;
  if (!next(v, ext_wanted)) return false;
  e.kind = v.kind;
  e.flags = v.flags;
  e.phase = v.phase;
  e.aux = load<uint16_t>(v.core + offsetof(format::CoreRecord, aux));
  e.track_id = v.track_id;
  e.name_id = load<uint32_t>(v.core + offsetof(format::CoreRecord, name_id));
  e.ts_raw = load<uint64_t>(v.core + offsetof(format::CoreRecord, ts));
  e.value = load<uint64_t>(v.core + offsetof(format::CoreRecord, value));
  e.corr = load<uint64_t>(v.core + offsetof(format::CoreRecord, corr));
  e.offset = v.offset;
  e.ts_ns = v.ts_ns;
  e.dur_ns = v.dur_ns;
  e.ids = v.ids;
  e.frames = v.has(format::Ext::kStackSample) ? v.frames : std::span<const uint32_t>();
  e.requested_ns = (v.ext_mask & kRequestedExts) != 0 ? v.requested_ns : 0;
  e.ext_mask = v.ext_mask;
  const uint32_t m = v.ext_mask;
  if (m == 0) return true;
  const auto copy = [&](format::Ext x, auto& member) {
    const unsigned slot = static_cast<uint8_t>(x) - format::kExtBase;
    if ((m & (1u << slot)) != 0) std::memcpy(&member, v.ext[slot], sizeof member);
  };
  copy(format::Ext::kIo, e.io);
  copy(format::Ext::kWork, e.work);
  copy(format::Ext::kCopy, e.copy);
  copy(format::Ext::kDevice, e.device);
  copy(format::Ext::kCollective, e.collective);
  copy(format::Ext::kApi, e.api);
  copy(format::Ext::kStep, e.step);
  copy(format::Ext::kRange, e.range);
  copy(format::Ext::kSample, e.sample);
  copy(format::Ext::kLoaderConfig, e.loader_config);
  copy(format::Ext::kBatchHandoff, e.batch_handoff);
  copy(format::Ext::kChannelHandoff, e.channel_handoff);
  copy(format::Ext::kStackSample, e.stack_sample);
  return true;
}

inline bool TraceReader::Impl::read_ext(RecordView& e, bool known) {
  Stream& s = stream;
  const uint64_t off = s.payload_off + s.pos;
  if (s.block_end - s.pos < sizeof(format::ExtHeader))
    return fail(off, "extension header runs past its track block");
  const auto h = load<format::ExtHeader>(s.buf.data() + s.pos);
  if (h.bytes < sizeof h || h.bytes % 8 != 0) [[unlikely]]
    return fail_ext_size(off, h.bytes, false);
  if (h.bytes > s.block_end - s.pos) [[unlikely]]
    return fail_ext_size(off, h.bytes, true);
  if (known && !apply_ext(e, h, s.buf.data() + s.pos, off)) return false;
  s.pos += h.bytes;
  return true;
}

bool TraceReader::Impl::fail_ext_size(uint64_t off, uint16_t bytes, bool past_block) {
  if (past_block)
    return fail(off, "extension of " + std::to_string(bytes) + " bytes runs past its track block");
  return fail(off, "extension of " + std::to_string(bytes) +
                       " bytes (must be at least 8 and a multiple of 8)");
}

bool TraceReader::Impl::fail_id_list(uint64_t off, uint32_t ids, uint64_t fit) {
  return fail(off, "id list claims " + std::to_string(ids) + " ids but holds " + std::to_string(fit));
}

namespace {

// Bytes format 1 defines for each typed extension (IdList, StackSample:
// the part before the ids or frames).
constexpr uint16_t kExtMinBytes[] = {
    sizeof(format::IoExt),           sizeof(format::WorkExt),
    sizeof(format::ExtHeader),       sizeof(format::CopyExt),
    sizeof(format::DeviceExt),       sizeof(format::CollectiveExt),
    sizeof(format::ApiExt),          sizeof(format::StepExt),
    sizeof(format::RangeExt),        sizeof(format::SampleExt),
    sizeof(format::LoaderConfigExt), sizeof(format::BatchHandoffExt),
    sizeof(format::ChannelHandoffExt), sizeof(format::StackSampleExt)};
static_assert(std::size(kExtMinBytes) ==
              static_cast<size_t>(format::Ext::kStackSample) - format::kExtBase + 1);
static_assert(std::size(kExtMinBytes) == kExtTypes);

}  // namespace

inline bool TraceReader::Impl::apply_ext(RecordView& e, const format::ExtHeader& h,
                                         const uint8_t* p, uint64_t off) {
  using format::Ext;
  const unsigned slot = h.type - format::kExtBase;
  if (slot >= std::size(kExtMinBytes)) {  // a type of a later minor
    ++stream.unknown_exts;
    return true;
  }
  // An extension that is not wanted gets the same checks and is left out.
  const bool wanted = (stream.ext_wanted & (1u << slot)) != 0;
  if (h.type == static_cast<uint8_t>(Ext::kIdList)) {
    const uint64_t fit = (h.bytes - sizeof h) / sizeof(uint64_t);
    if (h.aux > fit) return fail_id_list(off, h.aux, fit);
    if (!wanted) return true;
    e.ext[slot] = p;
    e.ext_mask |= 1u << slot;
    if (h.aux == 0) return true;  // (memcpy into an empty vector's null data() is UB)
    const size_t old = stream.ids.size();
    stream.ids.resize(old + h.aux);  // bounded by the checked extension length
    std::memcpy(stream.ids.data() + old, p + sizeof h, size_t{h.aux} * sizeof(uint64_t));
    return true;
  }
  if (h.bytes < kExtMinBytes[slot]) return fail_short_ext(off, h.type, h.bytes);
  if (h.type == static_cast<uint8_t>(Ext::kStackSample)) [[unlikely]]
    return apply_stack_sample(e, h, p, off, wanted);
  if (!wanted) return true;
  e.ext[slot] = p;  // a longer (newer) extension keeps its format 1 prefix
  e.ext_mask |= 1u << slot;
  return true;
}

bool TraceReader::Impl::apply_stack_sample(RecordView& e, const format::ExtHeader& h,
                                           const uint8_t* p, uint64_t off, bool wanted) {
  const auto n = load<uint16_t>(p + offsetof(format::StackSampleExt, frame_count));
  const uint64_t fit = (h.bytes - sizeof(format::StackSampleExt)) / sizeof(uint32_t);
  if (n > fit) return fail_frames(off, n, fit);
  if (!wanted) return true;
  const unsigned slot = h.type - format::kExtBase;
  e.ext[slot] = p;
  e.ext_mask |= 1u << slot;
  stream.frames.resize(n);  // bounded by the checked extension length
  if (n != 0)
    std::memcpy(stream.frames.data(), p + sizeof(format::StackSampleExt), n * sizeof(uint32_t));
  return true;
}

bool TraceReader::Impl::fail_frames(uint64_t off, uint32_t frames, uint64_t fit) {
  return fail(off, "stack sample claims " + std::to_string(frames) + " frames but holds " +
                       std::to_string(fit));
}

void TraceReader::Impl::view_pipeline_fields(RecordView& e, uint8_t flags) {
  if (e.has(format::Ext::kStackSample))
    e.frames = std::span<const uint32_t>(stream.frames.data(), stream.frames.size());
  if ((e.ext_mask & kRequestedExts) != 0) e.requested_ns = requested_ns(e, flags);
}

int64_t TraceReader::Impl::requested_ns(const RecordView& e, uint8_t flags) {
  using format::Ext;
  const uint64_t ticks =
      e.has(Ext::kBatchHandoff)
          ? e.ext_field<uint64_t>(Ext::kBatchHandoff, offsetof(format::BatchHandoffExt, requested))
          : e.ext_field<uint64_t>(Ext::kChannelHandoff,
                                  offsetof(format::ChannelHandoffExt, requested));
  if (ticks == 0) return 0;
  if ((flags & format::kTimesNs) != 0) return clamp_ns(static_cast<int64_t>(ticks));
  return ticks_to_ns(ticks);
}

bool TraceReader::Impl::fail_short_ext(uint64_t off, uint8_t type, uint16_t bytes) {
  return fail(off, std::string("extension ") + ext_label(type) + " of " + std::to_string(bytes) +
                       " bytes is shorter than format 1 defines");
}

void TraceReader::Impl::finish_stream() {
  Stream& s = stream;
  s.done = true;
  if (s.finished_once) return;
  s.finished_once = true;
  if (s.unknown_kinds > 0 || s.unknown_exts > 0)
    warn("skipped " + std::to_string(s.unknown_kinds) + " records of unknown kinds and " +
         std::to_string(s.unknown_exts) + " unknown extensions (written by a newer stallscope?)");
  if (s.clamped_times > 0)
    warn(std::to_string(s.clamped_times) +
         " timestamps or durations were out of range of the clock triples and were clamped");
}

}  // namespace stallscope::reader
