// stallscope loader — storage tier and page-cache state.
//
// classify_file() names a file's storage tier from statfs (local disk,
// network or FUSE, memory) and picks once per file how page-cache hits of
// buffered reads are told apart: RWF_NOWAIT reads where the filesystem
// supports them, else cachestat(2) where permitted, else latency.
// drop_cache() evicts a file or a directory tree from the page cache
// (fsync + POSIX_FADV_DONTNEED per file) without machine-wide settings.
#pragma once

#include <cstdint>
#include <string>

#include <stallscope/format.hpp>

#include "stallscope/loader/export.hpp"
#include "stallscope/loader/sys.hpp"

namespace stallscope::loader {

struct TierInfo {
  format::Tier tier = format::Tier::kUnknown;
  format::CacheMethod method = format::CacheMethod::kNone;
  std::string fs;  // "ext4", "tmpfs", "nfs", "fuse", "0x<magic>" …
};

// Filesystem name and tier for a statfs f_type magic.
STALLSCOPE_LOADER_API TierInfo tier_of_magic(uint64_t magic) noexcept;
// Tier of the open file `fd`, and the hit/miss method for buffered reads:
// kTier for memory, kNowait where RWF_NOWAIT works (probed with a 1-byte
// read), kCachestat where cachestat(2) is permitted, else kLatency.
STALLSCOPE_LOADER_API TierInfo classify_file(Sys& sys, int fd) noexcept;
// Is a read of `bytes` that took `ns` a page-cache hit? (latency method:
// faster than 25 us + 0.25 ns per byte, i.e. above ~4 GB/s)
STALLSCOPE_LOADER_API bool latency_says_hit(uint64_t bytes, uint64_t ns) noexcept;

// Evicts `path` (a file, or every file below a directory) from the page
// cache. Returns 0 or -errno of the first failure (the rest is still tried).
STALLSCOPE_LOADER_API int drop_cache(const std::string& path) noexcept;

STALLSCOPE_LOADER_API std::string_view tier_name(format::Tier t) noexcept;
STALLSCOPE_LOADER_API std::string_view cache_method_name(format::CacheMethod m) noexcept;

}  // namespace stallscope::loader
