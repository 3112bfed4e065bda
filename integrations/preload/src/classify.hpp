// What a new descriptor is (one fstat, one fstatfs, the path) and the
// page-cache state of one read (one cachestat, else its latency).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "fd_table.hpp"

namespace stallscope::preload {

// Classifies `fd`, opened from `path` (nullptr or relative: the path is
// read from /proc/self/fd). Returns the slot contents to store.
FdInfo classify_fd(int fd, const char* path) noexcept;
// For a descriptor never seen: classify it and store the result unless the
// slot changed meanwhile. Returns what the table now says.
FdInfo classify_unseen(int fd, const FdInfo& seen) noexcept;

// Tier of a filesystem magic (statfs f_type); false for pseudo
// filesystems (proc, sysfs, cgroup, …) whose files are never storage.
bool storage_tier_of_magic(uint64_t magic, uint8_t* tier) noexcept;

struct CacheVerdict {
  uint8_t cache = 0;   // format::Cache
  uint8_t method = 0;  // format::CacheMethod
  uint64_t hit_bytes = 0;
};
// Before a classified read: pages of [offset, offset+len) already cached.
// Returns false when cachestat is refused (the method becomes latency).
bool cache_before_read(int fd, uint64_t offset, uint64_t len, CacheVerdict* v) noexcept;
// After a read classified by latency.
CacheVerdict cache_by_latency(uint64_t bytes, int64_t ns) noexcept;

}  // namespace stallscope::preload
