// Page-aligned, locked host memory without CUDA.
#include <errno.h>
#include <sys/mman.h>

#include <cstdint>

#include "log.hpp"
#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

namespace {
constexpr uint64_t kHuge = 2ull << 20;
constexpr uint64_t kHugeFrom = 512ull << 10;  // buffers from this size get huge pages

// What a buffer of `bytes` maps: from kHugeFrom a whole number of 2 MiB
// pages, so that every page of it can be a huge page.
uint64_t mapped_bytes(uint64_t bytes) noexcept {
  if (bytes == 0) return 4096;
  return bytes >= kHugeFrom ? (bytes + kHuge - 1) / kHuge * kHuge : bytes;
}

// 2 MiB-aligned, a whole number of 2 MiB pages, huge-page backed where THP
// allows (madvise mode included). An O_DIRECT read then lands in one
// physically contiguous segment per huge page instead of one per 4 KiB
// page, and io_uring registers the buffer as huge pages (only when all of
// its pages are), so a 1 MiB read is one request, not two (a block queue of
// 254 segments splits 256 pages). On a virtual disk that is several times
// the throughput (docs/performance.md).
void* map_huge(uint64_t bytes) noexcept {
  const uint64_t span = bytes + kHuge;
  auto* raw = static_cast<char*>(
      ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (raw == MAP_FAILED) return nullptr;
  const uint64_t head = (kHuge - reinterpret_cast<uintptr_t>(raw) % kHuge) % kHuge;
  if (head > 0) ::munmap(raw, head);
  const uint64_t tail = span - head - bytes;
  if (tail > 0) ::munmap(raw + head + bytes, tail);
  char* p = raw + head;
  ::madvise(p, bytes, MADV_HUGEPAGE);  // best effort: EINVAL without THP
  return p;
}

}  // namespace

void* alloc_locked(uint64_t bytes, bool want_lock, bool* locked) noexcept {
  return alloc_locked(bytes, want_lock, locked, Pages::kHuge);
}

void* alloc_locked(uint64_t bytes, bool want_lock, bool* locked, Pages pages) noexcept {
  if (locked) *locked = false;
  bytes = mapped_bytes(bytes);  // the same size either way: free_locked needs no kind
  void* p = nullptr;
  if (bytes >= kHugeFrom && pages == Pages::kHuge) {
    p = map_huge(bytes);
    if (p == nullptr) return nullptr;
  } else {
    // Not advised: what a program's own buffers get (fio's, for one).
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
  }
  if (want_lock) {
    if (::mlock(p, bytes) == 0) {
      if (locked) *locked = true;
    } else {
      STALLSCOPE_LOADER_NOTE_ONCE("cannot lock staging memory (%s; RLIMIT_MEMLOCK or no "
                                  "CAP_IPC_LOCK): using unlocked memory, counted",
                                  errno == EPERM ? "EPERM" : "ENOMEM");
    }
  }
  return p;
}

void free_locked(void* p, uint64_t bytes, bool locked) noexcept {
  if (p == nullptr) return;
  bytes = mapped_bytes(bytes);
  if (locked) ::munlock(p, bytes);
  ::munmap(p, bytes);
}

}  // namespace stallscope::loader
