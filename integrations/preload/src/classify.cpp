#include "classify.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "socket_reads.hpp"
#include "stallscope/format.hpp"
#include "stallscope/internal/tier.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::preload {

namespace {

using format::Tier;

constexpr long kSysCachestat = 451;  // Linux 6.5; Debian 12's headers lack it
struct CachestatRange { uint64_t off, len; };
struct Cachestat { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; };
constexpr uint64_t kPage = 4096;

uint32_t intern_path(int fd, const char* path) noexcept {
  if (path != nullptr && path[0] == '/') return stallscope_name_intern(path);
  char link[32], buf[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const long n = ::syscall(SYS_readlink, link, buf, sizeof buf - 1);
  if (n <= 0) return path != nullptr ? stallscope_name_intern(path) : 0;
  buf[n] = '\0';
  return stallscope_name_intern(buf);
}

}  // namespace

bool storage_tier_of_magic(uint64_t magic, uint8_t* tier) noexcept {
  if (internal::is_pseudo_filesystem(magic)) return false;
  const internal::FsInfo* fs = internal::find_filesystem(magic);
  *tier = static_cast<uint8_t>(fs != nullptr ? fs->tier : Tier::kUnknown);
  return true;
}

FdInfo classify_fd(int fd, const char* path) noexcept {
  FdInfo info;
  struct stat st {};
  if (::syscall(SYS_fstat, fd, &st) != 0) return info;
  const long fl = ::syscall(SYS_fcntl, fd, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK)) info.flags |= kNonBlocking;
  // A network socket made elsewhere (accept, inherited) is storage like
  // one made by socket(); a pipe or unix socket from elsewhere is foreign.
  if (S_ISSOCK(st.st_mode)) return classify_socket(fd, info.flags);
  if (S_ISFIFO(st.st_mode)) {
    info.kind = FdKind::kForeign;
    return info;
  }
  info.kind = FdKind::kOther;
  if (!S_ISREG(st.st_mode)) return info;
  struct statfs sf {};
  if (::syscall(SYS_fstatfs, fd, &sf) != 0) return info;
  if (!storage_tier_of_magic(static_cast<uint64_t>(sf.f_type), &info.tier)) return info;
  info.kind = FdKind::kFile;
  if (fl >= 0 && (fl & O_APPEND)) info.flags |= kPositionUnknown;
  info.path = intern_path(fd, path);
  return info;
}

FdInfo classify_unseen(int fd, const FdInfo& seen) noexcept {
  FdInfo info = classify_fd(fd, nullptr);
  if (info.kind == FdKind::kUnseen) return info;  // not open: nothing to store
  if (fd_table().write(fd, info, seen.gen)) {
    if (info.kind == FdKind::kFile) {
      const long pos = ::syscall(SYS_lseek, fd, 0L, SEEK_CUR);
      fd_table().set_position(fd, pos > 0 ? static_cast<uint64_t>(pos) : 0);
    }
    info.gen = seen.gen + 1;
  }
  return info;
}

bool cache_before_read(int fd, uint64_t offset, uint64_t len, CacheVerdict* v) noexcept {
  if (len == 0) return false;
  const uint64_t first = offset / kPage, last = (offset + len - 1) / kPage;
  CachestatRange range{first * kPage, (last - first + 1) * kPage};
  Cachestat cs{};
  if (::syscall(kSysCachestat, fd, &range, &cs, 0u) != 0) return false;
  const uint64_t pages = last - first + 1;
  const uint64_t cached = cs.nr_cache < pages ? cs.nr_cache : pages;
  v->method = static_cast<uint8_t>(format::CacheMethod::kCachestat);
  v->hit_bytes = cached == pages ? len : cached * kPage;
  if (v->hit_bytes > len) v->hit_bytes = len;
  v->cache = static_cast<uint8_t>(cached == pages ? format::Cache::kHit
                                  : cached == 0   ? format::Cache::kMiss
                                                  : format::Cache::kPartial);
  return true;
}

CacheVerdict cache_by_latency(uint64_t bytes, int64_t ns) noexcept {
  const bool hit = internal::latency_says_hit(bytes, ns > 0 ? static_cast<uint64_t>(ns) : 0);
  CacheVerdict v;
  v.method = static_cast<uint8_t>(format::CacheMethod::kLatency);
  v.cache = static_cast<uint8_t>(hit ? format::Cache::kHit : format::Cache::kMiss);
  v.hit_bytes = hit ? bytes : 0;
  return v;
}

}  // namespace stallscope::preload
