// Open files of a dataset, opened lazily by the I/O thread: O_DIRECT where
// configured and allowed, the tier and page-cache method of each, and the
// size check that catches files changed since the dataset was listed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <stallscope/trace.hpp>

#include "stallscope/loader/config.hpp"
#include "stallscope/loader/dataset.hpp"
#include "stallscope/loader/tier.hpp"

namespace stallscope::loader::detail {

inline constexpr uint64_t kDirectAlign = 4096;

struct OpenFile {
  int fd = -1;           // O_DIRECT when direct, else buffered
  int buffered_fd = -1;  // buffered twin of a direct fd (unaligned remainders), lazy
  int retired_fd = -1;   // the O_DIRECT fd after a read refused it: requests queued
                         // on it must not find it closed (or its number reused)
  bool direct = false;
  bool nowait_ok = true;
  uint32_t users = 0;  // samples in progress
  uint64_t size = 0;   // at open
  TierInfo tier;
  NameId name = 0;
};

class FileTable {
 public:
  FileTable(const Dataset& ds, Sys& sys, Toggle direct) noexcept;
  ~FileTable();
  FileTable(const FileTable&) = delete;
  FileTable& operator=(const FileTable&) = delete;

  // The open file for a sample, or nullptr with *error naming the file and
  // `offset` (missing, unreadable, changed size). Counts a user.
  OpenFile* acquire(uint32_t file, uint64_t offset, std::string* error) noexcept;
  void release(uint32_t file) noexcept;
  // O_DIRECT was refused at the first read (EINVAL): read this file buffered.
  void refuse_direct(uint32_t file) noexcept;
  // A buffered fd for a direct file (for unaligned remainders); -1 on failure.
  int buffered_fd(uint32_t file) noexcept;
  const std::string& path(uint32_t file) const noexcept { return ds_.files()[file].path; }
  const OpenFile& get(uint32_t file) const noexcept { return files_[file]; }
  // Pages of [off, off+len) in the page cache (cachestat), or -errno.
  long cachestat(uint32_t file, uint64_t off, uint64_t len) noexcept {
    return sys_.cachestat_pages(files_[file].fd, off, len);
  }
  uint64_t direct_fallbacks() const noexcept { return direct_fallbacks_; }
  bool wants_direct(uint32_t file) const noexcept;
  void close_all() noexcept;

 private:
  int open_file(uint32_t file, OpenFile& f, std::string* error) noexcept;
  void close_file(OpenFile& f) noexcept;

  const Dataset& ds_;
  Sys& sys_;
  Toggle direct_;
  bool direct_by_size_ = false;  // auto: mean sample large enough for O_DIRECT
  std::vector<OpenFile> files_;
  uint32_t open_count_ = 0;
  uint64_t direct_fallbacks_ = 0;
};

}  // namespace stallscope::loader::detail
