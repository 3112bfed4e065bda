// Storage tier from statfs, the page-cache method per file, drop_cache().
#include "stallscope/loader/tier.hpp"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace stallscope::loader {

namespace {

struct FsEntry {
  uint64_t magic;
  const char* name;
  format::Tier tier;
  bool nowait;  // RWF_NOWAIT buffered reads supported
};

constexpr FsEntry kFilesystems[] = {
    {0xEF53, "ext4", format::Tier::kLocal, true},
    {0x58465342, "xfs", format::Tier::kLocal, true},
    {0x9123683E, "btrfs", format::Tier::kLocal, true},
    {0xF2F52010, "f2fs", format::Tier::kLocal, false},
    {0x2FC12FC1, "zfs", format::Tier::kLocal, false},
    {0x794c7630, "overlay", format::Tier::kLocal, false},
    {0x01021994, "tmpfs", format::Tier::kMemory, false},
    {0x858458f6, "ramfs", format::Tier::kMemory, false},
    {0x6969, "nfs", format::Tier::kNetwork, false},
    {0xFF534D42, "cifs", format::Tier::kNetwork, false},
    {0xFE534D42, "smb2", format::Tier::kNetwork, false},
    {0x0BD00BD0, "lustre", format::Tier::kNetwork, false},
    {0x47504653, "gpfs", format::Tier::kNetwork, false},
    {0x19830326, "beegfs", format::Tier::kNetwork, false},
    {0x00C36400, "ceph", format::Tier::kNetwork, false},
    {0x01021997, "9p", format::Tier::kNetwork, false},
    {0x65735546, "fuse", format::Tier::kNetwork, false},
};

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
  for (const FsEntry& e : kFilesystems) {
    if (e.magic != (magic & 0xFFFFFFFFu)) continue;
    t.tier = e.tier;
    t.fs = e.name;
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
  bool nowait_fs = false;
  for (const FsEntry& e : kFilesystems) nowait_fs |= e.magic == magic && e.nowait;
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
  return static_cast<double>(ns) < 25000.0 + 0.25 * static_cast<double>(bytes);
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
