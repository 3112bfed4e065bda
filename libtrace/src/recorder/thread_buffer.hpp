// One thread's event buffer: a bounded single-producer / single-consumer
// byte ring. The owning thread appends whole records (reserve, fill, one
// release store); the flusher drains them. Full means drop and count —
// the producer never waits, locks, allocates or makes a syscall.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "stallscope/format.hpp"

namespace stallscope::detail {

class ThreadBuffer {
 public:
  // `capacity` is a power of two; the memory is owned by the buffer.
  ThreadBuffer(uint32_t track_id, size_t capacity);
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  // Producer side (owning thread only). Appends `core` followed by
  // `ext_bytes` of extension records, or drops the event and counts it; a
  // kGap record with the number dropped precedes the next event written.
  bool write(const format::CoreRecord& core, const void* ext, uint32_t ext_bytes) noexcept;
  // Hot path: one complete core record, no extension, stored field by
  // field straight into the ring (no staging copy on the stack).
  inline bool write_complete(uint8_t kind, uint32_t name, uint64_t ts, uint64_t dur,
                             uint64_t corr) noexcept;
  // The same with the extension bytes gathered from several pieces.
  struct Piece {
    const void* data;
    size_t bytes;
  };
  bool write_pieces(const format::CoreRecord& core, const Piece* pieces, size_t n_pieces) noexcept;

  // Consumer side (flusher only). Appends every complete record written so
  // far to `out` (at most `max_bytes`) and frees that space; returns bytes.
  size_t drain(std::vector<uint8_t>& out, size_t max_bytes);
  // Discards the content (fork child: the parent owns those events).
  void reset_after_fork() noexcept;

  // Bytes waiting to be drained (any thread; approximate).
  size_t pending_bytes() const noexcept;
  size_t capacity() const noexcept { return mask_ + 1; }
  uint32_t track_id() const noexcept { return track_id_; }
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  // The thread exited: drain once more, then free (flusher).
  void retire() noexcept { retired_.store(true, std::memory_order_release); }
  bool retired() const noexcept { return retired_.load(std::memory_order_acquire); }

 private:
  void copy_in(uint64_t pos, const void* src, size_t n) noexcept;

  uint8_t* data_;
  size_t mask_;
  uint32_t track_id_;
  // Producer-owned line.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;    // last tail seen: reload only when it looks full
  std::atomic<uint64_t> dropped_{0};
  uint64_t gap_count_ = 0;     // dropped since the last record written
  uint64_t gap_first_ts_ = 0;  // timestamp of the first of those
  // Consumer-owned line.
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<bool> retired_{false};
};

inline bool ThreadBuffer::write_complete(uint8_t kind, uint32_t name, uint64_t ts, uint64_t dur,
                                         uint64_t corr) noexcept {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const size_t at = head & mask_;
  // Common case: room known from the cached tail, no gap to announce, no
  // wrap inside the record — four 8-byte stores and one release store.
  if (__builtin_expect(gap_count_ == 0 && at + sizeof(format::CoreRecord) <= capacity() &&
                           capacity() - (head - tail_cache_) >= sizeof(format::CoreRecord),
                       1)) {
    // kind | flags (kComplete = 0) | aux (0) | name: the first 8 bytes.
    const uint64_t first = uint64_t{kind} | (uint64_t{name} << 32);
    uint8_t* p = data_ + at;
    __builtin_memcpy(p, &first, 8);
    __builtin_memcpy(p + 8, &ts, 8);
    __builtin_memcpy(p + 16, &dur, 8);
    __builtin_memcpy(p + 24, &corr, 8);
    head_.store(head + sizeof(format::CoreRecord), std::memory_order_release);
    return true;
  }
  const format::CoreRecord core{kind, format::kComplete, 0, name, ts, dur, corr};
  return write(core, nullptr, 0);
}

// Walks a block of records and counts core records other than gaps, and
// the events gaps say were dropped. Returns false on a malformed block.
struct RecordCounts {
  uint64_t events = 0;
  uint64_t gap_dropped = 0;
};
bool count_records(const uint8_t* data, size_t bytes, RecordCounts& counts) noexcept;

}  // namespace stallscope::detail
