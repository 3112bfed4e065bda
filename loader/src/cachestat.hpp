// cachestat(2), declared here: Debian 12's headers predate it (Linux 6.5).
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace stallscope::loader::detail {

inline constexpr long kSysCachestat = 451;  // same number on every architecture

struct CachestatRange {
  uint64_t off;
  uint64_t len;  // 0 = to the end of the file
};

struct Cachestat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

// 0 or -1 with errno (ENOSYS before 6.5, EPERM for files the caller may
// not write and does not own).
inline int cachestat(int fd, CachestatRange* range, Cachestat* out) noexcept {
  return static_cast<int>(::syscall(kSysCachestat, fd, range, out, 0u));
}

}  // namespace stallscope::loader::detail
