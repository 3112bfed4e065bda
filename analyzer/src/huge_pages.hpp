// An allocator for the engine's large windows (lineage rings, sample-head
// tables, channel buffers): blocks of 1 MiB and more are mapped on their own,
// 2 MiB-aligned, and offered to the kernel as transparent huge pages
// (madvise MADV_HUGEPAGE; a no-op where THP is off). Hundreds of MiB walked
// through 4 KiB pages cost a TLB miss every few records and a page fault per
// 4 KiB when first touched; huge pages cut both by 512. Smaller blocks come
// from operator new.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace stallscope::analyzer {

namespace huge_detail {

inline constexpr size_t kHuge = size_t{2} << 20;
inline constexpr size_t kMapFrom = size_t{1} << 20;

inline size_t mapped_bytes(size_t bytes) noexcept { return (bytes + kHuge - 1) / kHuge * kHuge; }

// Maps `bytes` (a multiple of kHuge) at a kHuge-aligned address.
inline void* map_aligned(size_t bytes) {
  const size_t span = bytes + kHuge;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (at + kHuge - 1) / kHuge * kHuge;
  if (aligned > at) ::munmap(p, aligned - at);
  const uintptr_t end = at + span, used_end = aligned + bytes;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace huge_detail

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < huge_detail::kMapFrom) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(huge_detail::map_aligned(huge_detail::mapped_bytes(bytes)));
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes < huge_detail::kMapFrom) {
      ::operator delete(p);
      return;
    }
    ::munmap(p, huge_detail::mapped_bytes(bytes));
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

template <typename T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace stallscope::analyzer
