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
#include "stallscope/trace.hpp"

namespace stallscope::preload {

namespace {

using format::Tier;

struct FsTier {
  uint32_t magic;
  Tier tier;
};
// The loader's table (loader/src/tier.cpp), kept here so the shim links
// nothing of the loader. Unlisted storage filesystems are kUnknown.
constexpr FsTier kStorage[] = {
    {0xEF53, Tier::kLocal},       {0x58465342, Tier::kLocal},   {0x9123683E, Tier::kLocal},
    {0xF2F52010, Tier::kLocal},   {0x2FC12FC1, Tier::kLocal},   {0x794c7630, Tier::kLocal},
    {0x01021994, Tier::kMemory},  {0x858458f6, Tier::kMemory},  {0x6969, Tier::kNetwork},
    {0xFF534D42, Tier::kNetwork}, {0xFE534D42, Tier::kNetwork}, {0x0BD00BD0, Tier::kNetwork},
    {0x47504653, Tier::kNetwork}, {0x19830326, Tier::kNetwork}, {0x00C36400, Tier::kNetwork},
    {0x01021997, Tier::kNetwork}, {0x65735546, Tier::kNetwork},
};
// Pseudo filesystems: their "regular files" are kernel state, not data.
constexpr uint32_t kPseudo[] = {
    0x9fa0,      // proc
    0x62656572,  // sysfs
    0x27e0eb,    // cgroup
    0x63677270,  // cgroup2
    0x64626720,  // debugfs
    0x74726163,  // tracefs
    0x1cd1,      // devpts
    0x42494e4d,  // binfmt_misc
    0x73636673,  // securityfs
    0xcafe4a11,  // bpf
};

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
  const auto m = static_cast<uint32_t>(magic & 0xFFFFFFFFu);
  for (uint32_t p : kPseudo) if (p == m) return false;
  *tier = static_cast<uint8_t>(Tier::kUnknown);
  for (const FsTier& e : kStorage) {
    if (e.magic == m) *tier = static_cast<uint8_t>(e.tier);
  }
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
  // Same rule as the loader (loader/src/tier.cpp latency_says_hit).
  const bool hit = static_cast<double>(ns) < 25000.0 + 0.25 * static_cast<double>(bytes);
  CacheVerdict v;
  v.method = static_cast<uint8_t>(format::CacheMethod::kLatency);
  v.cache = static_cast<uint8_t>(hit ? format::Cache::kHit : format::Cache::kMiss);
  v.hit_bytes = hit ? bytes : 0;
  return v;
}

}  // namespace stallscope::preload
