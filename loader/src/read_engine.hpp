// The read engine: splits samples into read requests (chunks of the read
// size, aligned for O_DIRECT), keeps up to the queue depth in flight on a
// StorageReader, resubmits remainders of short reads and retries -EAGAIN,
// -EINTR and -ECANCELED a bounded number of times, and records one
// storage_read per request. Each request occupies a slot whose user_data
// carries a generation, so a completion that matches no request in flight
// is counted and ignored — never applied twice. Used by one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <stallscope/trace.hpp>

#include "file_table.hpp"
#include "stallscope/loader/storage.hpp"

namespace stallscope::loader::detail {

// One sample to read into caller memory.
struct SampleRead {
  uint32_t file = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::byte* buf = nullptr;   // aligned to kDirectAlign
  uint64_t buf_bytes = 0;     // >= direct_span(offset, length)
  uint64_t trace_sample = 0;  // ids for the trace
  uint64_t trace_batch = 0;
  void* owner = nullptr;  // caller's context
  // Results.
  std::byte* view = nullptr;  // the sample's bytes inside buf
  int err = 0;
  std::string error;  // names the file and offset
  uint32_t chunks_left = 0;
};

// Bytes of buffer a sample needs when read with O_DIRECT.
uint64_t direct_span(uint64_t offset, uint64_t length) noexcept;

struct EngineStats {
  uint64_t reads = 0, bytes = 0, retries = 0, short_reads = 0, stray = 0;
  uint64_t hit_bytes = 0, miss_bytes = 0;
};

class ReadEngine {
 public:
  using Done = std::function<void(SampleRead*)>;
  ReadEngine(StorageReader& reader, FileTable& files, uint64_t read_size, Done done);

  // Queues a sample (never blocks). Errors surface through `done`.
  void add(SampleRead* s) noexcept;
  // Submits what fits and handles what completed, waiting up to timeout_ms
  // when something is in flight; the slots those completions freed are
  // refilled and submitted before `done` runs for the samples they ended.
  // 0, or -errno when the backend failed.
  int poll(int timeout_ms) noexcept;
  // Drops queued (unsubmitted) requests: their samples end with -ECANCELED.
  void cancel_pending() noexcept;
  // Nothing queued, in flight or waiting to be reported (samples that failed
  // before any read are reported by the next poll()).
  bool idle() const noexcept {
    return pending_.empty() && retry_.empty() && failed_.empty() && in_flight_ == 0;
  }
  uint32_t in_flight() const noexcept { return in_flight_; }
  // Requests waiting for a slot (queued and to be retried).
  size_t queued() const noexcept { return pending_.size() + retry_.size(); }
  const EngineStats& stats() const noexcept { return stats_; }

 private:
  struct Chunk {
    SampleRead* s = nullptr;
    uint64_t off = 0;
    uint32_t len = 0;
    uint32_t done = 0;
    std::byte* dst = nullptr;
    Ticks created = 0, started = 0;
    uint64_t hit = 0;
    uint16_t qd = 0;
    uint8_t attempts = 0;
    format::Cache cache = format::Cache::kUnknown;
    format::CacheMethod method = format::CacheMethod::kNone;
    bool nowait = false;
    bool direct = false;
  };
  struct Slot {
    Chunk c;
    uint32_t gen = 0;
    bool busy = false;       // holds a chunk (ready or in flight)
    bool submitted = false;  // in flight with generation `gen`
  };

  void split(SampleRead* s, const OpenFile& f) noexcept;
  void fail_sample(SampleRead* s, int err, std::string text) noexcept;
  void chunk_finished(SampleRead* s) noexcept;
  void fill_slots() noexcept;
  void start_chunk(uint32_t slot) noexcept;
  int submit_ready() noexcept;
  void on_completion(const Completion& c) noexcept;
  void on_result(uint32_t slot, int32_t res) noexcept;
  void on_error(uint32_t slot, int32_t res) noexcept;
  void finish(uint32_t slot) noexcept;
  void requeue(uint32_t slot) noexcept;
  void trace(const Chunk& c) noexcept;

  StorageReader& reader_;
  FileTable& files_;
  uint64_t read_size_;
  Done done_;
  std::deque<Chunk> pending_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_, retry_;
  std::vector<ReadRequest> batch_;
  std::vector<Completion> comps_;
  std::vector<SampleRead*> failed_;
  std::vector<SampleRead*> reaped_;  // samples ended by this poll's completions
  bool reaping_ = false;
  uint32_t in_flight_ = 0;
  EngineStats stats_;
};

}  // namespace stallscope::loader::detail
