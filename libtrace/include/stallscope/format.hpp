// stallscope trace file format, version 1 — the on-disk layout shared by the
// recorder (writer) and the reader. docs/trace-format.md is the prose spec;
// this header is the normative byte layout. All integers are little-endian.
//
//   file   := FileHeader Chunk*            (an End chunk last when complete)
//   Chunk  := ChunkHeader payload[payload_bytes]   (payload padded to 8 bytes)
//
// Event chunks hold TrackBlocks; a TrackBlock holds records of one track.
// A record is either a 32-byte CoreRecord (first byte < 0x80) or an
// extension (first byte >= 0x80, length-prefixed) that belongs to the core
// record before it. Readers skip unknown core kinds (32 bytes) and unknown
// extensions (by length), so later versions add kinds without format breaks.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace stallscope::format {

static_assert(std::endian::native == std::endian::little,
              "the trace format is little-endian; the recorder writes native records");

inline constexpr char kMagic[8] = {'S', 'T', 'A', 'L', 'L', 'S', 'C', 'P'};
inline constexpr uint16_t kVersionMajor = 1;  // readers refuse a newer major
inline constexpr uint16_t kVersionMinor = 0;  // readers accept any minor
inline constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"
// Readers refuse anything larger: bounds every allocation a file can cause.
inline constexpr uint32_t kMaxChunkPayload = 64u << 20;

// One (TSC, CLOCK_MONOTONIC, CLOCK_REALTIME) sample. `ticks` is the raw
// timestamp unit of the file: TSC cycles, or monotonic ns when the file's
// kFileTicksAreNs flag is set (then ticks == mono_ns).
struct ClockTriple {
  uint64_t ticks;
  int64_t mono_ns;
  int64_t real_ns;
};
static_assert(sizeof(ClockTriple) == 24);

enum FileFlags : uint32_t {
  kFileTicksAreNs = 1u << 0,   // no invariant TSC: ticks are monotonic ns
  kFileRingSegment = 1u << 1,  // one segment of a ring-mode recording
};

struct FileHeader {           // 96 bytes at offset 0
  char magic[8];              // kMagic
  uint16_t version_major;
  uint16_t version_minor;
  uint32_t header_bytes;      // sizeof(FileHeader) for v1.0; readers skip extra
  uint32_t flags;             // FileFlags
  uint32_t pid;
  uint32_t parent_pid;
  uint32_t segment;           // ring segment index (0 in stop mode)
  uint64_t ring_discarded;    // events in segments already deleted (ring mode)
  uint64_t tsc_hz;            // estimate, informative only (readers interpolate)
  ClockTriple start;          // at recorder start
  uint32_t reserved[5];       // zero in v1.0
  uint32_t crc32;             // CRC-32 (zlib crc32) of the bytes before this field
};
static_assert(sizeof(FileHeader) == 96);

enum class ChunkType : uint16_t {
  kStrings = 1,     // StringEntry*            (interned names, ids ascending)
  kTracks = 2,      // TrackEntry*
  kEvents = 3,      // TrackBlock*
  kMetadata = 4,    // UTF-8 JSON object: process and run facts
  kAttachment = 5,  // AttachmentHeader name[name_bytes] data (topology, config)
  kEnd = 6,         // EndSummary TrackTotals[n_tracks]: file complete
};

struct ChunkHeader {  // 48 bytes
  uint32_t magic;     // kChunkMagic
  uint16_t type;      // ChunkType
  uint16_t flags;     // 0 in v1
  uint32_t payload_bytes;  // multiple of 8, <= kMaxChunkPayload
  uint32_t payload_crc32;  // CRC-32 (zlib crc32) of the payload
  uint64_t seq;            // 0, 1, 2 … within one file
  ClockTriple clock;       // taken when the chunk was written
};
static_assert(sizeof(ChunkHeader) == 48);

struct StringEntry {  // followed by `bytes` UTF-8 bytes, padded to 8
  uint32_t id;
  uint32_t bytes;
};

enum class TrackType : uint8_t {
  kThread = 1,     // a host thread of this process
  kGpuStream = 2,  // a device stream (device, stream)
  kProcess = 3,    // process-wide events (sampler counters, capture marks)
  kEmulated = 4,   // the emulated device of a rank
};

struct TrackEntry {   // 24 bytes
  uint32_t track_id;  // unique within the file
  uint8_t type;       // TrackType
  uint8_t reserved[3];
  uint32_t tid;       // OS thread id, or stream id for device tracks
  uint32_t device;    // device ordinal for device tracks
  uint32_t name_id;   // string id (thread name), 0 = unnamed
  uint32_t parent_track;  // 0 = none
};
static_assert(sizeof(TrackEntry) == 24);

struct TrackBlock {   // followed by `bytes` of records
  uint32_t track_id;
  uint32_t bytes;     // multiple of 8
};

// ---------------------------------------------------------------- records --

enum class Kind : uint8_t {
  kStep = 1,
  kDataWait = 2,
  kStorageRead = 3,
  kPreprocess = 4,
  kBatchReady = 5,
  kApiCall = 6,
  kH2D = 7,
  kD2H = 8,
  kD2D = 9,
  kMemset = 10,
  kKernel = 11,
  kCollective = 12,
  kSync = 13,
  kRange = 14,
  kCounter = 15,
  kCapture = 16,  // capture window: kBegin = on, kEnd = window end
  kGap = 17,      // `value` events of this track were dropped right here
  kMark = 18,     // an instant note (e.g. "GPU activity handed to …")
  kSample = 19,          // one dataset item's load inside a loader
  kLoaderConfig = 20,    // a loader's configuration at iterator creation
  kBatchHandoff = 21,    // a batch from a loader worker to the trainer
  kChannelHandoff = 22,  // one object through a producer/consumer channel
  kStackSample = 23,     // one stack sample of a thread
  kMaxKnown = kMark,
};

enum Phase : uint8_t {  // low 2 bits of CoreRecord::flags
  kComplete = 0,  // ts + dur
  kBegin = 1,     // matched with the next kEnd of the same track (stack),
  kEnd = 2,       //   or by corr when kAsync is set
  kInstant = 3,
};

enum RecordFlags : uint8_t {
  kPhaseMask = 0x03,
  kAsync = 1u << 2,       // may overlap other events of its track
  kEmulated = 1u << 3,    // produced by the emulated device
  kValueDouble = 1u << 4, // counter: `value` holds an IEEE double
  kTimesNs = 1u << 5,     // ts/dur are already ns of the file's mono clock
};

struct CoreRecord {  // 32 bytes
  uint8_t kind;      // Kind (< 0x80)
  uint8_t flags;     // Phase | RecordFlags
  uint16_t aux;      // kind-specific small value (see docs/trace-format.md)
  uint32_t name_id;  // interned string id, 0 = none
  uint64_t ts;       // ticks
  uint64_t value;    // dur in ticks for kComplete; counter value; gap count
  uint64_t corr;     // correlation id (0 = none); counter: subject tid/pid
};
static_assert(sizeof(CoreRecord) == 32);

inline constexpr uint8_t kExtBase = 0x80;

enum class Ext : uint8_t {
  kIo = 0x80,          // storage_read attributes
  kWork = 0x81,        // preprocess / data_wait / batch ids
  kIdList = 0x82,      // a list of 64-bit ids (batch_ready sample ids)
  kCopy = 0x83,        // h2d/d2h/d2d/memset
  kDevice = 0x84,      // kernel / sync: device and stream
  kCollective = 0x85,  // collective attributes
  kApi = 0x86,         // api_call attributes
  kStep = 0x87,        // step index and source
  kRange = 0x88,       // range domain
};

struct ExtHeader {  // 8 bytes; `bytes` includes this header, multiple of 8
  uint8_t type;     // Ext (>= 0x80)
  uint8_t reserved;
  uint16_t bytes;
  uint32_t aux;     // type-specific
};

enum class Tier : uint8_t { kUnknown = 0, kLocal = 1, kNetwork = 2, kMemory = 3 };
enum class Cache : uint8_t { kUnknown = 0, kHit = 1, kMiss = 2, kPartial = 3 };
// How a read's page-cache state was found. kDirect: an O_DIRECT read,
// which bypasses the cache (all of its bytes count as misses). kFault: a
// major page fault on a memory-mapped file (a miss by definition).
enum class CacheMethod : uint8_t {
  kNone = 0, kNowait = 1, kCachestat = 2, kLatency = 3, kTier = 4, kDirect = 5, kFault = 6 };

struct IoExt {           // 56 bytes: ExtHeader{kIo, aux = file string id}
  ExtHeader h;
  uint64_t bytes;        // bytes returned
  uint64_t offset;       // file offset
  uint64_t hit_bytes;    // page-cache hit bytes where known
  uint64_t queued_ns;    // time waiting for submission before the read
  uint64_t sample_id;    // 0 = none
  uint8_t tier;          // Tier
  uint8_t cache;         // Cache
  uint8_t cache_method;  // CacheMethod
  uint8_t reserved;
  uint16_t queue_depth;  // reads in flight at submission
  uint16_t reserved2;
};
static_assert(sizeof(IoExt) == 56);

enum class WaitSource : uint8_t {
  kUnknown = 0, kApi = 1, kRange = 2, kHook = 3, kPipe = 4, kInferred = 5 };

struct WorkExt {       // 32 bytes: preprocess, data_wait, batch_ready
  ExtHeader h;         // aux = worker index (preprocess) or WaitSource
  uint64_t sample_id;  // first sample of the item, 0 = none
  uint64_t batch_id;   // 0 = none
  uint32_t count;      // samples covered
  uint32_t reserved;
};
static_assert(sizeof(WorkExt) == 32);

struct IdListExt {     // ExtHeader{kIdList, aux = count} then uint64_t[count]
  ExtHeader h;
};
inline constexpr uint32_t kMaxIdsPerExt = (0xFFF8u - sizeof(ExtHeader)) / 8;

enum class MemKind : uint8_t {
  kUnknown = 0, kPageable = 1, kPinned = 2, kDevice = 3, kManaged = 4 };

struct CopyExt {       // 24 bytes
  ExtHeader h;         // aux = stream
  uint64_t bytes;
  uint8_t src;         // MemKind
  uint8_t dst;         // MemKind
  uint16_t device;
  uint32_t reserved;
};
static_assert(sizeof(CopyExt) == 24);

struct DeviceExt {     // 16 bytes: kernel, sync
  ExtHeader h;         // aux = stream
  uint16_t device;
  uint16_t sync_kind;  // sync: 0 unknown 1 device 2 stream 3 event 4 context
  uint32_t reserved;
};
static_assert(sizeof(DeviceExt) == 16);

enum class CollOp : uint8_t {
  kUnknown = 0, kAllReduce = 1, kAllGather = 2, kReduceScatter = 3,
  kBroadcast = 4, kReduce = 5, kAllToAll = 6, kSend = 7, kRecv = 8,
  kBarrier = 9 };

struct CollectiveExt {  // 48 bytes
  ExtHeader h;          // aux = op (CollOp) | dtype << 8
  uint64_t bytes;
  uint64_t comm_id;     // stable communicator id
  uint64_t seq;         // per-communicator sequence number
  uint32_t rank;        // rank within the communicator
  uint32_t nranks;
  int32_t peer;         // p2p peer, -1 otherwise
  uint32_t flags;       // kCollEnqueued; 0 in traces written before it existed
};
static_assert(sizeof(CollectiveExt) == 48);
// CollectiveExt::flags: the span is the host-side call that enqueued the
// collective (an NCCL call returning): its end is not the transfer's end.
inline constexpr uint32_t kCollEnqueued = 1;
// With kCollEnqueued: a call span the preload shim keeps while stallscope's
// NCCL profiler plugin records the collective. NCCL starts the plugin's
// events after it launched the kernel (when the plan runs, maybe on another
// thread), so only this span holds the launch: it serves to tie the NCCL
// kernel to its call, and is no collective record of its own.
inline constexpr uint32_t kCollJoinOnly = 2;

enum class ApiDomain : uint8_t {
  kUnknown = 0, kCudaRuntime = 1, kCudaDriver = 2, kNccl = 3, kMpi = 4 };

struct ApiExt {       // 16 bytes
  ExtHeader h;        // aux = callback id
  uint8_t domain;     // ApiDomain
  uint8_t reserved[3];
  int32_t result;
};
static_assert(sizeof(ApiExt) == 16);

enum class StepSource : uint8_t {
  kUnknown = 0, kApi = 1, kRange = 2, kHook = 3, kInferred = 4 };

struct StepExt {        // 16 bytes
  ExtHeader h;          // aux = StepSource
  uint64_t index;
};
static_assert(sizeof(StepExt) == 16);

struct RangeExt {       // 16 bytes
  ExtHeader h;          // aux = domain string id (0 = default domain)
  uint32_t color;
  uint32_t category;
};
static_assert(sizeof(RangeExt) == 16);

struct AttachmentHeader {
  uint32_t name_bytes;
  uint32_t reserved;
  uint64_t data_bytes;
};

struct EndSummary {
  uint32_t n_tracks;
  uint32_t reserved;
  uint64_t end_mono_ns;
  uint64_t disk_dropped;     // events not written because of the disk budget
  uint64_t bytes_written;    // file size before this chunk
};

struct TrackTotals {
  uint32_t track_id;
  uint32_t reserved;
  uint64_t written;          // events (core records) written
  uint64_t dropped_buffer;   // dropped because the thread buffer was full
  uint64_t dropped_disk;     // dropped because of the disk budget / errors
};

// Rounded-up size helpers.
constexpr uint32_t pad8(uint32_t n) { return (n + 7u) & ~7u; }

}  // namespace stallscope::format
