// Page-aligned, locked host memory without CUDA.
#include <errno.h>
#include <sys/mman.h>

#include <cstdint>

#include "log.hpp"
#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

namespace {
constexpr uint64_t kHuge = 2ull << 20;
}  // namespace

void* alloc_locked(uint64_t bytes, bool want_lock, bool* locked) noexcept {
  if (locked) *locked = false;
  if (bytes == 0) bytes = 4096;
  void* p = nullptr;
  if (bytes >= kHuge) {
    // 2 MiB-aligned and huge-page backed where THP allows (madvise mode
    // included): an O_DIRECT read of 1 MiB then lands in 1-2 physically
    // contiguous segments instead of 256 pages (fewer descriptors for a
    // virtual disk to map; docs/performance.md "loader vs fio").
    const uint64_t span = bytes + kHuge;
    auto* raw = static_cast<char*>(
        ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (raw == MAP_FAILED) return nullptr;
    const uint64_t head = (kHuge - reinterpret_cast<uintptr_t>(raw) % kHuge) % kHuge;
    if (head > 0) ::munmap(raw, head);
    const uint64_t tail = span - head - bytes;
    if (tail > 0) ::munmap(raw + head + bytes, tail);
    p = raw + head;
    ::madvise(p, bytes, MADV_HUGEPAGE);  // best effort: EINVAL without THP
  } else {
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
  if (bytes == 0) bytes = 4096;
  if (locked) ::munlock(p, bytes);
  ::munmap(p, bytes);
}

}  // namespace stallscope::loader
