// Positional reads of one regular file (pread), retrying EINTR and short reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace stallscope::reader::detail {

class File {
 public:
  File() = default;
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Opens a regular file read-only; false with `*why` set (strerror text).
  bool open(const std::string& path, std::string* why);
  // Reads from `n` bytes at `data` instead (not copied: they must outlive this).
  void open_memory(const uint8_t* data, size_t n) noexcept;
  uint64_t size() const noexcept { return size_; }
  // Reads exactly `n` bytes at `off`; false on an I/O error or end of file.
  bool read_at(uint64_t off, void* buf, size_t n) const noexcept;

 private:
  int fd_ = -1;
  const uint8_t* mem_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace stallscope::reader::detail
