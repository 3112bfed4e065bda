// stallscope trace file format, version 1.1 — the on-disk layout shared by the
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
// 1.1: kinds 19-23 (sample, loader_config, batch_handoff, channel_handoff,
// stack_sample) and their extensions 0x89-0x8D; 1.0 readers skip them.
inline constexpr uint16_t kVersionMinor = 1;  // readers accept any minor
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
  // Format 1.1: the input pipeline seen from inside and the host's stacks.
  kSample = 19,          // one dataset item's load (__getitem__) in a loader: SampleExt
  kLoaderConfig = 20,    // instant: a loader's configuration at iterator creation
  kBatchHandoff = 21,    // a batch from a loader worker: its put (ts) to the trainer's receive
  kChannelHandoff = 22,  // one object through a channel stallscope did not build: put to get
  kStackSample = 23,     // instant: one stack sample of a thread (StackSampleExt)
  kMaxKnown = kStackSample,
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
  // Format 1.1.
  kSample = 0x89,          // sample spans: loader, generation, batch, sample, worker
  kLoaderConfig = 0x8A,    // loader_config: the DataLoader's settings
  kBatchHandoff = 0x8B,    // batch_handoff: loader, batch, worker, when it was asked for
  kChannelHandoff = 0x8C,  // channel_handoff: channel, producer, consumer, object
  kStackSample = 0x8D,     // stack_sample: thread, interval, cost, then frame ids
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

// kRelay: a wait on a condition variable or semaphore ended by another
// thread's signal (a relay: Pool.imap's result thread, a C++ queue).
enum class WaitSource : uint8_t {
  kUnknown = 0, kApi = 1, kRange = 2, kHook = 3, kPipe = 4, kInferred = 5, kRelay = 6 };

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

// ----------------------------------------------------------- format 1.1 --
// The input pipeline seen from inside (Python DataLoader hooks, channels
// the preload shim recognises) and stack samples of the host's threads.
// Loader identity: `loader_id` is a process-unique id of the DataLoader
// object (the trainer's), `generation` which iter() of it (0, 1, 2 …; a
// persistent-worker _reset starts the next), `batch_index` the batch
// within the generation; worker -1 is the trainer's own process
// (num_workers=0). Times in extensions are ticks like CoreRecord::ts (ns
// when the record has kTimesNs), 0 = unknown; readers convert them.

// What a sample span covers (SampleExt::part).
enum class SamplePart : uint8_t {
  kGetItem = 0,   // one dataset[index] (__getitem__)
  kNext = 1,      // one next() of an IterableDataset: no dataset index
  kGetItems = 2,  // one __getitems__ call for `count` samples of the batch
  kFetch = 3,     // a worker's whole fetch of the batch: its samples and the collate
  kCollate = 4,   // the collate_fn over `count` samples
};

// sample (kind 19), complete, on the thread that loaded it (the worker's,
// or the trainer's with num_workers=0): corr = batch_index.
struct SampleExt {         // 48 bytes
  ExtHeader h;             // aux = 0
  uint64_t loader_id;      // process-unique id of the DataLoader object
  uint64_t batch_index;    // within the generation
  uint64_t sample_index;   // dataset index (kNext: the item's ordinal in the worker's stream)
  uint32_t generation;     // which iter() of the loader
  int32_t worker;          // worker id; -1 = the trainer's process (num_workers=0)
  uint32_t count;          // samples the span covers: 1 for kGetItem/kNext
  uint8_t part;            // SamplePart
  uint8_t reserved[3];
};
static_assert(sizeof(SampleExt) == 48);

enum class MpContext : uint8_t { kUnknown = 0, kFork = 1, kSpawn = 2, kForkserver = 3 };
enum class DatasetKind : uint8_t { kUnknown = 0, kMapStyle = 1, kIterable = 2 };
// LoaderConfigExt::pin_memory: what was asked for and what torch did.
enum class PinMemory : uint8_t {
  kOff = 0,       // pin_memory=False
  kOn = 1,        // pin_memory=True, and a pin-memory thread runs
  kInactive = 2,  // pin_memory=True, turned off by torch (no accelerator)
};
// LoaderConfigExt::flags.
inline constexpr uint8_t kLoaderGetItems = 1;    // the dataset has __getitems__
inline constexpr uint8_t kLoaderOverridden = 2;  // a setting came from `stallscope run --set`

// loader_config (kind 20), instant at iterator creation (and each _reset):
// CoreRecord::name_id = the dataset's class name, corr = loader_id.
struct LoaderConfigExt {       // 64 bytes
  ExtHeader h;                 // aux = collate_fn name (string id, 0 = unknown/default)
  uint64_t loader_id;
  uint64_t dataset_len;        // len(dataset), 0 = unknown (iterable, no __len__)
  uint32_t generation;
  uint32_t num_workers;
  uint32_t prefetch_factor;    // 0 = not applicable (num_workers=0) or unknown
  uint32_t batch_size;         // 0 = None (batch_sampler given) or unknown
  uint32_t timeout_ms;         // DataLoader timeout, 0 = none
  uint32_t sampler_name;       // string id: the sampler's class, 0 = unknown
  uint32_t batch_sampler_name; // string id: the batch sampler's class, 0 = none/unknown
  uint32_t site_name;          // string id: where it was constructed ("train.py:42"), 0 = unknown
  uint8_t pin_memory;          // PinMemory
  uint8_t persistent_workers;  // 0/1
  uint8_t drop_last;           // 0/1
  uint8_t in_order;            // 0/1 (torch before in_order existed: 1)
  uint8_t mp_context;          // MpContext
  uint8_t dataset_kind;        // DatasetKind
  uint8_t flags;               // kLoaderGetItems | kLoaderOverridden
  uint8_t reserved;
};
static_assert(sizeof(LoaderConfigExt) == 64);

// batch_handoff (kind 21), complete and kAsync, on the trainer's track:
// ts = when the worker put the batch, ts + value = when the trainer
// received it; corr = batch_index.
struct BatchHandoffExt {  // 48 bytes
  ExtHeader h;            // aux = 0
  uint64_t loader_id;
  uint64_t batch_index;
  uint64_t requested;     // ticks: when the trainer asked for this batch, 0 = unknown
                          // (later than the receive when it came before its turn)
  uint32_t generation;
  int32_t worker;         // the worker that made it
  uint32_t worker_pid;    // its process, 0 = unknown
  uint32_t reserved;
};
static_assert(sizeof(BatchHandoffExt) == 48);

enum class ChannelType : uint8_t {
  kUnknown = 0, kPipe = 1, kMpQueue = 2, kSocket = 3, kUser = 4,
  kEventfd = 5, kCondVar = 6, kSemaphore = 7 };

// channel_handoff (kind 22), complete and kAsync, on the consumer's track:
// ts = the put, ts + value = the get; corr = object_id.
struct ChannelHandoffExt {  // 64 bytes
  ExtHeader h;              // aux = 0
  uint64_t channel_id;      // stable id of the channel (a pipe's inode, a queue's address)
  uint64_t object_id;       // 0 = none
  uint64_t bytes;           // 0 = unknown
  uint64_t requested;       // ticks: when the consumer's get began, 0 = unknown
  uint32_t producer_pid, producer_tid;  // 0 = unknown
  uint32_t consumer_pid, consumer_tid;
  uint8_t channel_type;     // ChannelType
  uint8_t reserved[3];
  uint32_t parts;           // reads (or writes) that carried the object, 0 = unknown
};
static_assert(sizeof(ChannelHandoffExt) == 64);

enum class OnCpu : uint8_t { kUnknown = 0, kRunning = 1, kBlocked = 2 };
// StackSampleExt::flags.
inline constexpr uint8_t kStackLate = 1;       // taken late (the GIL was held): interval_ns is real
inline constexpr uint8_t kStackTruncated = 2;  // more frames than recorded: outermost dropped
inline constexpr uint8_t kStackNative = 4;     // native frames (perf_event_open), not Python's

// stack_sample (kind 23), instant, on a track of the sampled thread:
// CoreRecord::name_id = the innermost frame. The extension is this header
// then uint32_t frames[frame_count] (string ids, innermost first), zero
// padded to 8: bytes = pad8(32 + 4 * frame_count).
struct StackSampleExt {  // 32 bytes, then the frames
  ExtHeader h;           // aux = 0
  uint64_t interval_ns;  // the sampling interval this sample stands for
  uint32_t tid;          // the sampled thread (OS thread id)
  uint32_t cost_ns;      // what taking the sample cost
  uint16_t frame_count;
  uint8_t on_cpu;        // OnCpu
  uint8_t flags;         // kStackLate | kStackTruncated | kStackNative
  uint32_t reserved;
};
static_assert(sizeof(StackSampleExt) == 32);
inline constexpr uint32_t kMaxStackFrames = (0xFFF8u - sizeof(StackSampleExt)) / 4;

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
