// The storage tier of a filesystem and the page-cache latency rule, shared
// by the loader (loader/src/tier.cpp) and the preload shim
// (integrations/preload/src/classify.cpp), so both say the same of a file.
// Header-only and allocation-free: the shim looks a tier up when a file is
// opened and applies the latency rule after a read.
//
//   const FsInfo* fs = find_filesystem(statfs_buf.f_type);  // nullptr: not listed
//   if (is_pseudo_filesystem(magic)) ...                    // proc, sysfs, …: no storage
//   bool hit = latency_says_hit(bytes, ns);
#pragma once

#include <cstdint>

#include "stallscope/format.hpp"

namespace stallscope::internal {

struct FsInfo {
  uint32_t magic;    // statfs f_type
  const char* name;  // as the trace and reports name it
  format::Tier tier;
  bool nowait;  // RWF_NOWAIT buffered reads tell a page-cache hit
};

// Storage filesystems by statfs magic. An unlisted one is Tier::kUnknown.
inline constexpr FsInfo kFilesystems[] = {
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

// Pseudo filesystems: their "regular files" are kernel state, not data.
inline constexpr uint32_t kPseudoFilesystems[] = {
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

// The entry of a statfs magic (only its low 32 bits count), or nullptr.
constexpr const FsInfo* find_filesystem(uint64_t magic) noexcept {
  const auto m = static_cast<uint32_t>(magic & 0xFFFFFFFFu);
  for (const FsInfo& e : kFilesystems)
    if (e.magic == m) return &e;
  return nullptr;
}

constexpr bool is_pseudo_filesystem(uint64_t magic) noexcept {
  const auto m = static_cast<uint32_t>(magic & 0xFFFFFFFFu);
  for (uint32_t p : kPseudoFilesystems)
    if (p == m) return true;
  return false;
}

// Page-cache state from a read's latency where nothing better is known: a
// read of `bytes` that took `ns` hit the cache if it beat 25 µs plus 0.25 ns
// per byte (a memory copy with room to spare; any device read is slower).
constexpr bool latency_says_hit(uint64_t bytes, uint64_t ns) noexcept {
  return static_cast<double>(ns) < 25000.0 + 0.25 * static_cast<double>(bytes);
}

}  // namespace stallscope::internal
