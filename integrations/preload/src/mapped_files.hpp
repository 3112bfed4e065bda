// Which file, and where in it, a faulting address reads: a cached copy of
// /proc/self/maps with each file's interned path and storage tier. Used by
// the fault sampler's thread only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace stallscope::preload {

struct FileHit {
  uint32_t file = 0;    // interned path
  uint8_t tier = 0;     // format::Tier, as the file's other reads get it
  uint64_t offset = 0;  // file offset of the faulting page
};

class MappedFiles {
 public:
  // Resolves `addr` (a page-aligned address is not required). False for
  // anonymous memory, programs and libraries (files with an executable
  // mapping), pseudo filesystems, or an
  // address no mapping holds even after re-reading the map. The map is
  // re-read when an address is not found in the cached copy (at most once
  // per kMinRefreshNs) or the copy is older than kMaxAgeNs, so a range
  // unmapped and mapped again to another file is seen within that time.
  bool resolve(uint64_t addr, int64_t now_ns, FileHit* out) noexcept;

  static constexpr int64_t kMinRefreshNs = 10'000'000;
  static constexpr int64_t kMaxAgeNs = 1'000'000'000;

 private:
  struct Entry {
    uint64_t start, end, offset;
    uint32_t file;  // 0: not a data file (anonymous, code, pseudo)
    uint8_t tier;
  };
  struct FileInfo {
    uint32_t id;
    uint8_t tier;
    bool storage;
  };
  bool refresh(int64_t now_ns) noexcept;
  const Entry* find(uint64_t addr) const noexcept;
  FileInfo file_info(const std::string& path);

  std::vector<Entry> entries_;  // sorted by start
  std::unordered_map<std::string, FileInfo> files_;
  std::string text_;
  int64_t read_at_ns_ = INT64_MIN / 2;
};

}  // namespace stallscope::preload
