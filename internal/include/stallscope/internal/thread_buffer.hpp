// One thread's event buffer: a bounded single-producer / single-consumer
// byte ring. The owning thread appends whole records (reserve, fill, one
// release store); the flusher drains them. Full means drop and count —
// the producer never waits, locks or allocates. The fast paths write only
// into the lower half of the free space; past half full the slow path
// (write_pieces) takes over and wakes the flusher (a futex wake, the only
// system call a producer makes; again only after the flusher drained some),
// so the flusher can sleep between its periodic flushes instead of polling
// the buffers.
//
// The producer is known by its stack: a thread made by a raw clone/clone3
// without CLONE_SETTLS shares its creator's thread-locals, this ring
// pointer included, and must never write into the creator's ring (two
// producers would corrupt it). Registration records the owner's stack; an
// event written on another stack takes the slow path, which asks the
// kernel for the thread id (the owner on a signal stack or a fiber's stack
// writes; anyone else is dropped and counted) — one subtraction and one
// comparison on the fast paths, no system call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "stallscope/format.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::detail {

// Called by a producer whose ring is past half full (again only once the
// flusher has drained some since): the recorder sets it to wake its
// flusher. Must be async-signal-safe (producers may record from signal
// handlers).
inline void (*g_half_full_hook)() noexcept = nullptr;

class ThreadBuffer {
 public:
  // Touched when the buffer is made (the default buffer whole); pages past
  // it on first use.
  static constexpr size_t kPrefaultBytes = size_t{2} << 20;

  // `capacity` is a power of two; the memory is owned by the buffer.
  ThreadBuffer(uint32_t track_id, size_t capacity);
  // The producer: thread `tid`, whose stack is [lo, lo + bytes). Until set
  // (and for rings shared under a lock: the process track) any thread may
  // write.
  void set_owner(uint32_t tid, uintptr_t stack_lo, size_t stack_bytes) noexcept {
    owner_tid_ = tid;
    stack_lo_ = stack_lo;
    stack_bytes_ = stack_bytes;
  }
  // Whether the calling code runs on the owner's stack (always true before
  // set_owner()).
  bool on_owner_stack() const noexcept { return stack_pointer() - stack_lo_ < stack_bytes_; }
  ~ThreadBuffer();
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;
  // In pages of its own (mmap), like its ring: freed on the flusher, which
  // must not call free() (thread_buffer.cpp).
  static void* operator new(size_t bytes);
  static void operator delete(void* p, size_t bytes) noexcept;

  // Producer side (owning thread only). Appends `core` followed by
  // `ext_bytes` of extension records, or drops the event and counts it; a
  // kGap record with the number dropped precedes the next event written.
  bool write(const format::CoreRecord& core, const void* ext, uint32_t ext_bytes) noexcept;
  // Hot path: one complete core record, no extension, stored field by
  // field straight into the ring (no staging copy on the stack).
  inline bool write_complete(uint8_t kind, uint32_t name, uint64_t ts, uint64_t dur,
                             uint64_t corr) noexcept;
  // Hot path of the typed recorders: `core` followed by an extension record
  // of `N` bytes (a multiple of 8) known at compile time, copied straight
  // into the ring — one bounds check, two fixed-size copies, one release
  // store. False, with nothing changed, where write() must be used instead.
  template <size_t N>
  inline bool try_write_fixed(const format::CoreRecord& core, const void* ext) noexcept {
    uint8_t* p = try_reserve<sizeof core + N>();
    if (p == nullptr) return false;
    __builtin_memcpy(p, &core, sizeof core);
    __builtin_memcpy(p + sizeof core, ext, N);
    commit<sizeof core + N>();
    return true;
  }
  // The fast path in two steps, for a record filled in place: room for
  // `N` bytes (a core record and its extensions, a multiple of 8) at the
  // head of the ring, or nullptr with nothing changed where write() must be
  // used instead (a gap to announce, a wrap inside the record, a ring that
  // looks full); then commit<N>() publishes them with one release store.
  template <size_t N>
  inline uint8_t* try_reserve() noexcept;
  // Asks for the next two cache lines at the head for writing, ahead of a
  // record that will be written there after a slow call.
  void prefetch_head() const noexcept {
    const uint8_t* p = data_ + (head_.load(std::memory_order_relaxed) & mask_);
    __builtin_prefetch(p, 1, 3);
    __builtin_prefetch(p + 64, 1, 3);
  }
  template <size_t N>
  inline void commit() noexcept {
    head_.store(head_.load(std::memory_order_relaxed) + N, std::memory_order_release);
  }
  // The same with the extension bytes gathered from several pieces.
  struct Piece {
    const void* data;
    size_t bytes;
  };
  bool write_pieces(const format::CoreRecord& core, const Piece* pieces, size_t n_pieces) noexcept;

  // Consumer side (flusher only). Appends every complete record written so
  // far to `out` (at most `max_bytes`) and frees that space; returns bytes.
  size_t drain(std::vector<uint8_t>& out, size_t max_bytes);
  // The same into `out`, which has room for `max_bytes` (no allocation).
  size_t drain(uint8_t* out, size_t max_bytes) noexcept;
  // Discards the content (fork child: the parent owns those events).
  void reset_after_fork() noexcept;

  // Bytes waiting to be drained (any thread; approximate).
  size_t pending_bytes() const noexcept;
  size_t capacity() const noexcept { return mask_ + 1; }
  uint32_t track_id() const noexcept { return track_id_; }
  // Events dropped: ring full, and written by a thread not the producer.
  uint64_t dropped() const noexcept {
    return dropped_.load(std::memory_order_relaxed) +
           foreign_dropped_.load(std::memory_order_relaxed);
  }
  // Counts an event of a thread that shares another's thread-locals and
  // could be given no ring of its own (any thread).
  void count_foreign_drop() noexcept { foreign_dropped_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t foreign_dropped() const noexcept {
    return foreign_dropped_.load(std::memory_order_relaxed);
  }

  // The thread exited: drain once more, then free (flusher).
  void retire() noexcept { retired_.store(true, std::memory_order_release); }
  bool retired() const noexcept { return retired_.load(std::memory_order_acquire); }

 private:
  static uintptr_t stack_pointer() noexcept {
    uintptr_t sp;
#if defined(__x86_64__)
    asm("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    asm("mov %0, sp" : "=r"(sp));
#else
    sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
#endif
    return sp;
  }
  // The slow path's check: false when a thread other than the owner
  // writes (counted in foreign_dropped_).
  bool producer_is_owner() noexcept;
  void copy_in(uint64_t pos, const void* src, size_t n) noexcept;
  // Fast-path room: `n` more bytes keep the ring at most half full (by the
  // cached tail).
  bool below_half(uint64_t head, size_t n) const noexcept { return head + n - tail_cache_ <= half_; }

  uint8_t* data_;
  size_t mask_;
  size_t half_;
  uint32_t track_id_;
  // Producer-owned line.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;    // last tail seen: reload only when it looks full
  std::atomic<uint64_t> dropped_{0};
  uint64_t gap_count_ = 0;     // dropped since the last record written
  uint64_t gap_first_ts_ = 0;  // timestamp of the first of those
  uint64_t woke_at_tail_ = ~uint64_t{0};  // tail when the flusher was last woken
  uintptr_t stack_lo_ = 0;                  // the owner's stack (set_owner)
  size_t stack_bytes_ = ~size_t{0};
  uint32_t owner_tid_ = 0;
  std::atomic<uint64_t> foreign_dropped_{0};  // any thread adds (fetch_add)
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
                           below_half(head, sizeof(format::CoreRecord)) && on_owner_stack(),
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

template <size_t N>
inline uint8_t* ThreadBuffer::try_reserve() noexcept {
  static_assert(N % 8 == 0, "records are padded to 8 bytes");
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const size_t at = head & mask_;
  const bool fits =
      gap_count_ == 0 && at + N <= capacity() && below_half(head, N) && on_owner_stack();
  return __builtin_expect(fits, 1) ? data_ + at : nullptr;
}

// The calling thread's buffer: null before its first event, after the
// thread exited, and when the memory budget gave it none (emit() counts
// those). Exported, under a versioned C name (inline_records.hpp,
// kInlineRecordsVersion), for the preload shim, whose read wrappers
// record inline without a call into the library; the recorder's other
// thread-locals stay inside it.
}  // namespace stallscope::detail

// Version 2 of the ring's producer side (the owner's stack checked): the
// symbol is linked under the version's name, so a shim and a recorder of
// different layouts fail to link; the source keeps the v1 spelling.
extern "C" STALLSCOPE_API thread_local constinit stallscope::detail::ThreadBuffer*
    stallscope_inline_v1_thread_buffer __asm__("stallscope_inline_v2_thread_buffer")
    __attribute__((tls_model("initial-exec")));

namespace stallscope::detail {

// emit() of a core record and one extension record of `N` bytes: the typed
// recorders' hot path, inlined into each (one TLS load, no call). The first
// event of a thread, a full ring, a gap to announce or a wrap take emit().
template <size_t N>
inline bool emit_fixed(const format::CoreRecord& core, const void* ext) noexcept {
  if (!g_capture.load(std::memory_order_relaxed)) return false;
  ThreadBuffer* b = stallscope_inline_v1_thread_buffer;
  if (__builtin_expect(b != nullptr && b->try_write_fixed<N>(core, ext), 1)) return true;
  return emit(core, ext, N);
}

// Walks a block of records and counts core records other than gaps, and
// the events gaps say were dropped. Returns false on a malformed block.
struct RecordCounts {
  uint64_t events = 0;
  uint64_t gap_dropped = 0;
};
bool count_records(const uint8_t* data, size_t bytes, RecordCounts& counts) noexcept;

}  // namespace stallscope::detail
