// Small readers and parsers for /proc, /sys and cgroup text files, shared by
// process facts, run identity and the CPU sampler. None of them throws on bad
// input: a missing file or a malformed value yields false / nullopt / empty.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::sys {

// Reads a whole small file into `out` (pseudo files report size 0, so this
// reads until EOF, at most `limit` bytes). False, with `out` empty, on error
// and for anything but a regular file (a FIFO is refused, never waited on).
bool read_text_file(const std::string& path, std::string& out, size_t limit = 1 << 20);

std::string_view trim(std::string_view s);

// Plain decimal integers: optional '-' (int64 only), digits, nothing else;
// nullopt on anything else or on overflow.
std::optional<int64_t> parse_int64(std::string_view s);
std::optional<uint64_t> parse_uint64(std::string_view s);

// Linux CPU list ("0-3,8,10-11") to sorted CPU numbers; empty if malformed.
std::vector<int> parse_cpu_list(std::string_view s);
// The inverse, compact: {0,1,2,3,8} -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& cpus);

// Field `n` (1-based, numbered as in proc(5)) of a /proc/<pid>/stat line,
// for n >= 3. Counted from the LAST ')' because field 2, the command name,
// may itself contain spaces and parentheses. Empty when absent.
std::string_view stat_field(std::string_view stat, int n);

// The value of a "key value" line (cpu.stat, /proc/.../status-like files).
std::optional<int64_t> find_key_value(std::string_view text, std::string_view key);

// A file descriptor this code opened, remembered by device and inode so that
// it is never closed after the program closed it and reused its number for
// one of its own files (close_range, closefrom — RELIABILITY.md 5).
class OwnedFd {
 public:
  OwnedFd() = default;
  ~OwnedFd() { reset(); }
  OwnedFd(OwnedFd&& o) noexcept { *this = std::move(o); }
  OwnedFd& operator=(OwnedFd&& o) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  // openat(dirfd, path, flags | O_CLOEXEC). Returns 0 or -errno.
  int open_at(int dirfd, const char* path, int flags);
  // The same for a descriptor kept open: moved away from the numbers the
  // program counts on (stallscope/internal/fd_limits.hpp).
  int open_kept_at(int dirfd, const char* path, int flags);
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // True while the descriptor number still refers to the file we opened.
  bool still_ours() const;
  // Closes the descriptor if it is still ours, forgets it either way.
  void reset();
  // Forgets without closing (the number is no longer ours, or after fork).
  void forget() { fd_ = -1; }
  // pread from offset 0 into buf (NUL-terminated, at most cap - 1 bytes).
  // Returns the byte count or -errno.
  ssize_t pread_text(char* buf, size_t cap) const;

 private:
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace stallscope::sys
