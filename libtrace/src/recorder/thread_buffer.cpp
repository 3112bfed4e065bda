#include "stallscope/internal/thread_buffer.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace stallscope::detail {

using format::CoreRecord;

namespace {

// Rings and their descriptors live in pages of their own, never in the C
// heap: the flusher frees them when their thread has exited, and a free()
// on the flusher would give it a malloc arena of its own (RELIABILITY.md 39).
void* map_pages(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

size_t page_round(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }

}  // namespace

void* ThreadBuffer::operator new(size_t bytes) { return map_pages(page_round(bytes)); }

void ThreadBuffer::operator delete(void* p, size_t bytes) noexcept {
  if (p != nullptr) ::munmap(p, page_round(bytes));
}

ThreadBuffer::ThreadBuffer(uint32_t track_id, size_t capacity)
    : data_(static_cast<uint8_t*>(map_pages(capacity))),
      mask_(capacity - 1),
      half_(capacity / 2),
      track_id_(track_id) {
  // Touch the first pages now, at registration, so the hot path rarely takes
  // a page fault on first use of its buffer; a large buffer's other pages
  // are touched as it first fills (one fault per 4 KiB of records), so a
  // thread that records little never costs its whole buffer in memory.
  std::memset(data_, 0, capacity < kPrefaultBytes ? capacity : kPrefaultBytes);
}

ThreadBuffer::~ThreadBuffer() { ::munmap(data_, capacity()); }

void ThreadBuffer::copy_in(uint64_t pos, const void* src, size_t n) noexcept {
  const size_t at = pos & mask_;
  const size_t first = n < capacity() - at ? n : capacity() - at;
  std::memcpy(data_ + at, src, first);
  if (first < n) std::memcpy(data_, static_cast<const uint8_t*>(src) + first, n - first);
}

bool ThreadBuffer::write(const CoreRecord& core, const void* ext, uint32_t ext_bytes) noexcept {
  const Piece piece{ext, ext_bytes};
  return write_pieces(core, &piece, ext_bytes != 0 ? 1 : 0);
}

bool ThreadBuffer::producer_is_owner() noexcept {
  if (on_owner_stack()) return true;
  // Off the owner's stack: the owner on a signal stack or a fiber, or a
  // thread sharing the owner's thread-locals (raw clone without
  // CLONE_SETTLS). Only the kernel knows which.
  if (static_cast<uint32_t>(::syscall(SYS_gettid)) == owner_tid_) return true;
  foreign_dropped_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool ThreadBuffer::write_pieces(const CoreRecord& core, const Piece* pieces,
                                size_t n_pieces) noexcept {
  if (__builtin_expect(!producer_is_owner(), 0)) return false;
  size_t ext_bytes = 0;
  for (size_t i = 0; i < n_pieces; ++i) ext_bytes += pieces[i].bytes;
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const size_t gap_bytes = gap_count_ != 0 ? sizeof(CoreRecord) : 0;
  const size_t need = gap_bytes + sizeof(CoreRecord) + ext_bytes;
  if (!below_half(head, need)) {
    tail_cache_ = tail_.load(std::memory_order_acquire);
    // Past half full: drain me — unless already asked and nothing was
    // drained since (a wake per drain at most, never per record).
    if (!below_half(head, need) && tail_cache_ != woke_at_tail_ && g_half_full_hook != nullptr) {
      g_half_full_hook();
      woke_at_tail_ = tail_cache_;
    }
  }
  if (capacity() - (head - tail_cache_) < need) {
    if (gap_count_++ == 0) gap_first_ts_ = core.ts;
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return false;
  }
  uint64_t pos = head;
  if (gap_bytes != 0) {
    CoreRecord gap{};
    gap.kind = static_cast<uint8_t>(format::Kind::kGap);
    gap.flags = format::kInstant;
    gap.ts = gap_first_ts_;
    gap.value = gap_count_;
    copy_in(pos, &gap, sizeof gap);
    pos += sizeof gap;
    gap_count_ = 0;
  }
  copy_in(pos, &core, sizeof core);
  pos += sizeof core;
  for (size_t i = 0; i < n_pieces; ++i) {
    copy_in(pos, pieces[i].data, pieces[i].bytes);
    pos += pieces[i].bytes;
  }
  head_.store(head + need, std::memory_order_release);
  return true;
}

size_t ThreadBuffer::drain(std::vector<uint8_t>& out, size_t max_bytes) {
  const size_t pending = pending_bytes();
  const size_t at = out.size();
  out.resize(at + (pending < max_bytes ? pending : max_bytes));
  const size_t n = drain(out.data() + at, out.size() - at);
  out.resize(at + n);
  return n;
}

size_t ThreadBuffer::drain(uint8_t* out, size_t max_bytes) noexcept {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  size_t n = static_cast<size_t>(head - tail);
  if (n == 0) return 0;
  if (n > max_bytes) {
    // Cut before a core record, so an event keeps its extensions.
    size_t pos = 0, boundary = 0;
    while (pos <= max_bytes && pos < n) {
      uint8_t hdr[4];
      for (size_t i = 0; i < 4; ++i) hdr[i] = data_[(tail + pos + i) & mask_];
      if (hdr[0] < format::kExtBase) {
        boundary = pos;
        pos += sizeof(CoreRecord);
      } else {
        pos += static_cast<size_t>(hdr[2] | (hdr[3] << 8));
      }
    }
    n = pos <= max_bytes ? pos : boundary;
    if (n == 0) return 0;
  }
  const size_t at = tail & mask_;
  const size_t first = n < capacity() - at ? n : capacity() - at;
  std::memcpy(out, data_ + at, first);
  if (first < n) std::memcpy(out + first, data_, n - first);
  tail_.store(tail + n, std::memory_order_release);
  return n;
}

void ThreadBuffer::reset_after_fork() noexcept {
  tail_.store(head_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  tail_cache_ = tail_.load(std::memory_order_relaxed);
  dropped_.store(0, std::memory_order_relaxed);
  gap_count_ = 0;
}

size_t ThreadBuffer::pending_bytes() const noexcept {
  return static_cast<size_t>(head_.load(std::memory_order_relaxed) -
                             tail_.load(std::memory_order_relaxed));
}

bool count_records(const uint8_t* data, size_t bytes, RecordCounts& counts) noexcept {
  size_t off = 0;
  while (off < bytes) {
    if (data[off] >= format::kExtBase) {
      if (bytes - off < sizeof(format::ExtHeader)) return false;
      uint16_t len;
      std::memcpy(&len, data + off + 2, sizeof len);
      if (len < sizeof(format::ExtHeader) || len % 8 != 0 || len > bytes - off) return false;
      off += len;
      continue;
    }
    if (bytes - off < sizeof(CoreRecord)) return false;
    CoreRecord r;
    std::memcpy(&r, data + off, sizeof r);
    if (r.kind == static_cast<uint8_t>(format::Kind::kGap)) {
      counts.gap_dropped += r.value;
    } else {
      ++counts.events;
    }
    off += sizeof r;
  }
  return true;
}

}  // namespace stallscope::detail
