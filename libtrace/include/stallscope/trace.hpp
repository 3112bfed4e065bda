// stallscope recorder — C++ API.
//
// Spans, steps, counters and the typed events of the trace format, written
// into per-thread lock-free buffers and flushed to one file per process by a
// background thread. Nothing here allocates, locks or makes a syscall per
// event (the first event of a thread registers its track once).
//
// Quickstart:
//
//   #include <stallscope/trace.hpp>
//   for (uint64_t i = 0; i < steps; ++i) {
//     stallscope::StepScope step(i);
//     {
//       STALLSCOPE_SPAN(stallscope::Kind::kDataWait, "next_batch");
//       batch = loader.next();
//     }
//     train(batch);
//   }
//
// Define STALLSCOPE_DISABLE before including to compile every macro out.
// With tracing compiled in but capture off, a span costs one predictable
// branch and its arguments are not evaluated.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "stallscope/clock.hpp"
#include "stallscope/format.hpp"
#include "stallscope/trace.h"

namespace stallscope {

using NameId = uint32_t;
using format::Kind;

namespace detail {
// Capture switch read on every event (relaxed). Exported for inlining.
STALLSCOPE_API extern std::atomic<bool> g_capture;
// Appends one core record plus `ext_bytes` of extension records to the
// calling thread's buffer, or drops and counts it. Returns false if dropped.
STALLSCOPE_API bool emit(const format::CoreRecord& core, const void* ext,
                         uint32_t ext_bytes) noexcept;
// emit(), on a track of thread `tid` of this process instead of the calling
// thread's: for records written on another thread's behalf (CUDA API calls
// that CUPTI delivers on its own thread, page faults sampled by a drain
// thread). The calling thread owns one such track per tid (at most
// kMaxProxyTracks; beyond, or when tid is 0 or its own, the record goes to
// its own track). The analyzer joins a thread's tracks by tid.
STALLSCOPE_API bool emit_for_thread(uint32_t tid, const format::CoreRecord& core, const void* ext,
                                    uint32_t ext_bytes) noexcept;
inline constexpr size_t kMaxProxyTracks = 256;
// Hot path of Span: one complete record, no extension.
STALLSCOPE_API void emit_complete(uint8_t kind, NameId name, Ticks start,
                                  uint64_t corr) noexcept;
}  // namespace detail

// True while capture is on (cheap; relaxed load).
inline bool enabled() noexcept {
  return detail::g_capture.load(std::memory_order_relaxed);
}

// Interns `name` (takes a lock; call once per name and keep the id).
STALLSCOPE_API NameId intern(std::string_view name) noexcept;

// RAII span of one kind on the calling thread: one complete record at
// destruction, ts = construction time. Not copyable; keep it on the stack.
class Span {
 public:
  Span(Kind kind, NameId name, uint64_t corr = 0) noexcept
      : start_(enabled() ? ticks_now() : 0), corr_(corr), name_(name),
        kind_(static_cast<uint8_t>(kind)) {}
  ~Span() {
    if (start_ != 0) detail::emit_complete(kind_, name_, start_, corr_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Ticks start_;
  uint64_t corr_;
  NameId name_;
  uint8_t kind_;
};

// ------------------------------------------------------------ typed events --
// Each records one event with its attributes; start/end are ticks. They
// return false when the event was dropped (counted) or capture is off.

STALLSCOPE_API bool record_step(uint64_t index, Ticks start, Ticks end,
                                format::StepSource source = format::StepSource::kApi) noexcept;

// RAII step marker: begin record at construction, end record at destruction,
// so a step that crashes mid-way still shows its start.
class StepScope {
 public:
  explicit StepScope(uint64_t index) noexcept : index_(index) { stallscope_step_begin(index); }
  ~StepScope() { stallscope_step_end(index_); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  uint64_t index_;
};

struct StorageRead {
  NameId file = 0;          // interned path
  uint64_t bytes = 0;
  uint64_t offset = 0;
  uint64_t hit_bytes = 0;   // page-cache hit bytes where known
  uint64_t queued_ns = 0;   // wait for submission before the read started
  uint64_t sample_id = 0;
  uint64_t batch_id = 0;    // carried in corr when set
  format::Tier tier = format::Tier::kUnknown;
  format::Cache cache = format::Cache::kUnknown;
  format::CacheMethod cache_method = format::CacheMethod::kNone;
  uint16_t queue_depth = 0;
};
STALLSCOPE_API bool record_storage_read(Ticks start, Ticks end, const StorageRead& r) noexcept;
// The same read, on a track of thread `tid` (detail::emit_for_thread).
STALLSCOPE_API bool record_storage_read_for(uint32_t tid, Ticks start, Ticks end,
                                            const StorageRead& r) noexcept;

struct Work {
  uint64_t sample_id = 0;
  uint64_t batch_id = 0;
  uint32_t count = 1;
  uint32_t worker = 0;
};
STALLSCOPE_API bool record_preprocess(NameId name, Ticks start, Ticks end, const Work& w) noexcept;
STALLSCOPE_API bool record_data_wait(Ticks start, Ticks end, uint64_t batch_id,
                                     format::WaitSource how = format::WaitSource::kApi) noexcept;
// A batch became available; its sample ids go into id-list extensions.
STALLSCOPE_API bool record_batch_ready(Ticks at, uint64_t batch_id,
                                       std::span<const uint64_t> sample_ids) noexcept;

struct ApiCall {
  NameId name = 0;
  uint64_t corr = 0;        // links to the device work it launched
  format::ApiDomain domain = format::ApiDomain::kUnknown;
  uint32_t cbid = 0;
  int32_t result = 0;
};
STALLSCOPE_API bool record_api_call(Ticks start, Ticks end, const ApiCall& a) noexcept;

struct Copy {
  Kind kind = Kind::kH2D;   // kH2D, kD2H, kD2D or kMemset
  uint64_t bytes = 0;
  format::MemKind src = format::MemKind::kUnknown;
  format::MemKind dst = format::MemKind::kUnknown;
  uint16_t device = 0;
  uint32_t stream = 0;
  uint64_t corr = 0;
  bool emulated = false;
};
STALLSCOPE_API bool record_copy(Ticks start, Ticks end, const Copy& c) noexcept;

struct DeviceWork {
  NameId name = 0;          // kernel name
  uint16_t device = 0;
  uint32_t stream = 0;
  uint64_t corr = 0;
  bool emulated = false;
};
STALLSCOPE_API bool record_kernel(Ticks start, Ticks end, const DeviceWork& k) noexcept;
// Host thread blocked on the device; sync_kind as in format::DeviceExt.
STALLSCOPE_API bool record_sync(Ticks start, Ticks end, const DeviceWork& what,
                                uint16_t sync_kind) noexcept;

struct Collective {
  NameId name = 0;
  format::CollOp op = format::CollOp::kUnknown;
  uint8_t dtype = 0;
  uint64_t bytes = 0;
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint32_t rank = 0;
  uint32_t nranks = 1;
  int32_t peer = -1;
  uint64_t corr = 0;
  bool emulated = false;
  // The span is the host-side call that enqueued the collective (NCCL):
  // the analyzer counts it as the trainer's host time, not as transfer.
  bool enqueued = false;
  // With enqueued: kept only to tie the NCCL kernel to the call
  // (format::kCollJoinOnly); another source records the collective itself.
  bool join_only = false;
};
STALLSCOPE_API bool record_collective(Ticks start, Ticks end, const Collective& c) noexcept;

STALLSCOPE_API bool record_range(NameId name, Ticks start, Ticks end, NameId domain = 0) noexcept;
// A sampled value; `subject` is the tid/pid it refers to (0 = this process).
STALLSCOPE_API bool record_counter(NameId name, double value, uint64_t subject = 0) noexcept;
STALLSCOPE_API bool record_mark(NameId text) noexcept;

// ---- Format 1.1: the input pipeline seen from inside, and stack samples
// (format.hpp explains loader ids, generations and batch indices).

struct Sample {
  uint64_t loader_id = 0;
  uint32_t generation = 0;
  uint64_t batch_index = 0;
  uint64_t sample_index = 0;
  int32_t worker = -1;  // -1 = the trainer's process (num_workers=0)
  uint32_t count = 1;   // samples the span covers
  format::SamplePart part = format::SamplePart::kGetItem;
};
// One dataset item's load (or a fetch, __getitems__ or collate: `part`).
STALLSCOPE_API bool record_sample(Ticks start, Ticks end, const Sample& s) noexcept;

struct LoaderConfig {
  uint64_t loader_id = 0;
  uint32_t generation = 0;
  uint32_t num_workers = 0;
  uint32_t prefetch_factor = 0;  // 0 = not applicable
  uint32_t batch_size = 0;       // 0 = None or unknown
  uint32_t timeout_ms = 0;
  uint64_t dataset_len = 0;      // 0 = unknown
  NameId dataset_name = 0;       // the dataset's class
  NameId collate_name = 0;
  NameId sampler_name = 0;
  NameId batch_sampler_name = 0;
  NameId site_name = 0;          // where the loader was constructed ("train.py:42")
  format::PinMemory pin_memory = format::PinMemory::kOff;
  bool persistent_workers = false;
  bool drop_last = false;
  bool in_order = true;
  format::MpContext mp_context = format::MpContext::kUnknown;
  format::DatasetKind dataset_kind = format::DatasetKind::kUnknown;
  uint8_t flags = 0;             // format::kLoaderGetItems | kLoaderOverridden
};
// A loader's configuration, an instant at `at` (iterator creation).
STALLSCOPE_API bool record_loader_config(Ticks at, const LoaderConfig& c) noexcept;

struct BatchHandoff {
  uint64_t loader_id = 0;
  uint32_t generation = 0;
  uint64_t batch_index = 0;
  int32_t worker = 0;
  uint32_t worker_pid = 0;
  Ticks requested = 0;  // when the trainer asked for the batch, 0 = unknown
};
// A batch from the worker's put (`put`) to the trainer's receive (`received`).
STALLSCOPE_API bool record_batch_handoff(Ticks put, Ticks received,
                                         const BatchHandoff& h) noexcept;

struct ChannelHandoff {
  uint64_t channel_id = 0;
  format::ChannelType type = format::ChannelType::kUnknown;
  uint32_t producer_pid = 0, producer_tid = 0;
  uint32_t consumer_pid = 0, consumer_tid = 0;
  uint64_t object_id = 0;  // 0 = none
  uint64_t bytes = 0;      // 0 = unknown
  uint32_t parts = 0;      // reads or writes that carried it, 0 = unknown
  Ticks requested = 0;     // when the consumer's get began, 0 = unknown
};
// One object through a channel, from its put (`put`) to its get (`got`).
STALLSCOPE_API bool record_channel_handoff(Ticks put, Ticks got, const ChannelHandoff& h) noexcept;

struct StackSample {
  uint32_t tid = 0;          // the sampled thread; 0 = the calling one
  uint64_t interval_ns = 0;  // the interval this sample stands for
  uint32_t cost_ns = 0;      // what taking it cost
  format::OnCpu on_cpu = format::OnCpu::kUnknown;
  uint8_t flags = 0;         // format::kStackLate | kStackTruncated | kStackNative
};
// One stack sample at `at`; `frames` are interned names, innermost first
// (past format::kMaxStackFrames the outermost are dropped, kStackTruncated
// set). Written on a track of thread s.tid (detail::emit_for_thread).
STALLSCOPE_API bool record_stack_sample(Ticks at, const StackSample& s,
                                        std::span<const NameId> frames) noexcept;

// Attachments (topology XML, configuration) stored once in the file.
// Copies `data`; returns 0 or -errno. Not for the hot path.
STALLSCOPE_API int attach(std::string_view name, std::string_view data) noexcept;

}  // namespace stallscope

#define STALLSCOPE_CAT2(a, b) a##b
#define STALLSCOPE_CAT(a, b) STALLSCOPE_CAT2(a, b)

#ifndef STALLSCOPE_DISABLE
// A span named by a string literal, interned once per call site.
#define STALLSCOPE_SPAN(kind, literal)                                                 \
  static const ::stallscope::NameId STALLSCOPE_CAT(stallscope_name_, __LINE__) =       \
      ::stallscope::intern(literal);                                                   \
  ::stallscope::Span STALLSCOPE_CAT(stallscope_span_, __LINE__)(                       \
      kind, STALLSCOPE_CAT(stallscope_name_, __LINE__))
// A user range, as NVTX push/pop would make it.
#define STALLSCOPE_RANGE(literal) STALLSCOPE_SPAN(::stallscope::Kind::kRange, literal)
#else
#define STALLSCOPE_SPAN(kind, literal) static_cast<void>(0)
#define STALLSCOPE_RANGE(literal) static_cast<void>(0)
#endif
