// Storage tier from statfs, the page-cache method per file, drop_cache().
#include "stallscope/loader/tier.hpp"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "stallscope/internal/tier.hpp"

namespace stallscope::loader {

namespace {

// Is the 1-byte RWF_NOWAIT read accepted (a hit, a miss or end of file)?
bool nowait_works(Sys& sys, int fd) {
  if ((::fcntl(fd, F_GETFL) & O_DIRECT) != 0) return true;  // known by filesystem
  char byte;
  iovec iov{&byte, 1};
  const ssize_t n = sys.preadv2(fd, &iov, 1, 0, RWF_NOWAIT);
  return n >= 0 || errno == EAGAIN;
}

int drop_one(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = 0;
  if (::fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS) rc = -errno;
  const int adv = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (rc == 0 && adv != 0) rc = -adv;
  ::close(fd);
  return rc;
}

}  // namespace

TierInfo tier_of_magic(uint64_t magic) noexcept {
  TierInfo t;
  if (const internal::FsInfo* e = internal::find_filesystem(magic)) {
    t.tier = e->tier;
    t.fs = e->name;
    return t;
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(magic));
  t.fs = hex;
  return t;
}

TierInfo classify_file(Sys& sys, int fd) noexcept {
  TierInfo t;
  struct statfs sf {};
  if (sys.fstatfs(fd, &sf) != 0) return t;
  const uint64_t magic = static_cast<uint64_t>(sf.f_type) & 0xFFFFFFFFu;
  t = tier_of_magic(magic);
  if (t.tier == format::Tier::kMemory) {
    t.method = format::CacheMethod::kTier;
    return t;
  }
  const internal::FsInfo* fs = internal::find_filesystem(magic);
  const bool nowait_fs = fs != nullptr && fs->nowait;
  if (nowait_fs && nowait_works(sys, fd)) {
    t.method = format::CacheMethod::kNowait;
  } else if (sys.cachestat_pages(fd, 0, 4096) >= 0) {
    t.method = format::CacheMethod::kCachestat;
  } else {
    t.method = format::CacheMethod::kLatency;
  }
  return t;
}

bool latency_says_hit(uint64_t bytes, uint64_t ns) noexcept {
  return internal::latency_says_hit(bytes, ns);
}

int drop_cache(const std::string& path) noexcept {
  try {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(path, ec)) return drop_one(path);
    int first = 0;
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      const int rc = drop_one(it->path().string());
      if (first == 0) first = rc;
    }
    return ec ? -ec.value() : first;
  } catch (...) {
    return -ENOMEM;
  }
}

std::string_view tier_name(format::Tier t) noexcept {
  switch (t) {
    case format::Tier::kLocal: return "local";
    case format::Tier::kNetwork: return "network";
    case format::Tier::kMemory: return "memory";
    default: return "unknown";
  }
}

std::string_view cache_method_name(format::CacheMethod m) noexcept {
  switch (m) {
    case format::CacheMethod::kNowait: return "nowait";
    case format::CacheMethod::kCachestat: return "cachestat";
    case format::CacheMethod::kLatency: return "latency";
    case format::CacheMethod::kTier: return "tier";
    case format::CacheMethod::kDirect: return "direct";
    default: return "none";
  }
}

}  // namespace stallscope::loader
