// Version 1 of the records the preload shim writes inline (internal: not
// installed, not for users). The storage read of trace.hpp's
// record_storage_read(), built without a call into the library, for the
// shim's read wrappers (one event per intercepted read, right after its
// system call, when every code or data page touched again is likely a TLB
// miss: a call into the library would touch its code, PLT and GOT pages).
// The library's record_storage_read() uses the same code, so both write the
// same bytes. The shim and the recorder meet through the thread's ring
// (thread_buffer.hpp), exported as stallscope_inline_v1_thread_buffer: a
// change to the layout of these records or of the ring's producer side
// bumps kInlineRecordsVersion and that symbol's name together, so a shim
// and a recorder of different layouts fail to link instead of corrupting a
// trace.
#pragma once

#include <new>

#include "stallscope/internal/thread_buffer.hpp"
#include "stallscope/format.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::detail {

inline constexpr int kInlineRecordsVersion = 2;  // 2: the ring checks its producer's stack

inline constexpr size_t kStorageReadBytes = sizeof(format::CoreRecord) + sizeof(format::IoExt);

// The core record and IoExt of a storage read, built at `p` (8-aligned,
// kStorageReadBytes long).
inline void build_storage_read(uint8_t* p, Ticks start, Ticks end, const StorageRead& r) noexcept {
  using namespace format;
  // Reads of one thread may be in flight together (io_uring): async.
  const uint8_t phase = end == start ? kInstant : kComplete;
  new (p) CoreRecord{static_cast<uint8_t>(Kind::kStorageRead),
                     static_cast<uint8_t>(kAsync | phase),
                     0,
                     r.file,
                     start,
                     end >= start ? end - start : 0,
                     r.batch_id};
  new (p + sizeof(CoreRecord))
      IoExt{ExtHeader{static_cast<uint8_t>(Ext::kIo), 0, sizeof(IoExt), r.file},
            r.bytes,
            r.offset,
            r.hit_bytes,
            r.queued_ns,
            r.sample_id,
            static_cast<uint8_t>(r.tier),
            static_cast<uint8_t>(r.cache),
            static_cast<uint8_t>(r.cache_method),
            0,
            r.queue_depth,
            0};
}

// record_storage_read(start, end, r), inline: built in place in the
// thread's ring where there is room, else on the stack and handed to emit().
inline bool emit_storage_read(Ticks start, Ticks end, const StorageRead& r) noexcept {
  if (!g_capture.load(std::memory_order_relaxed)) return false;
  ThreadBuffer* b = stallscope_inline_v1_thread_buffer;
  uint8_t* p = b != nullptr ? b->try_reserve<kStorageReadBytes>() : nullptr;
  if (__builtin_expect(p != nullptr, 1)) {
    build_storage_read(p, start, end, r);
    b->commit<kStorageReadBytes>();
    return true;
  }
  alignas(8) uint8_t rec[kStorageReadBytes];
  build_storage_read(rec, start, end, r);
  format::CoreRecord core;
  __builtin_memcpy(&core, rec, sizeof core);
  return emit(core, rec + sizeof core, sizeof(format::IoExt));
}

}  // namespace stallscope::detail
