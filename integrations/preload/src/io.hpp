// The recording side of every read wrapper: look the descriptor up, time
// the call, and record a storage read (regular files) or a data wait (a
// blocking read of a producer's channel).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "classify.hpp"
#include "fd_table.hpp"
#include "shim.hpp"

namespace stallscope::preload {

inline constexpr uint64_t kTablePosition = ~0ull;  // read(): the tracked position
inline constexpr uint64_t kAlwaysClassify = 64u << 10;  // bytes

class ReadScope {
 public:
  // `offset` is the file offset, or kTablePosition for calls that use and
  // advance the descriptor's position. `len` is the bytes asked for.
  ReadScope(int fd, uint64_t offset, uint64_t len) noexcept;
  // Records the call that returned `result` (bytes, or -1).
  void done(ssize_t result) noexcept;
  ReadScope(const ReadScope&) = delete;
  ReadScope& operator=(const ReadScope&) = delete;

 private:
  void begin_file(uint64_t offset, uint64_t len) noexcept;
  void end_file(uint64_t bytes) noexcept;
  void end_channel() noexcept;

  Guard guard_;
  int fd_;
  FdInfo info_;
  bool active_ = false;
  bool advance_ = false;
  bool classify_ = false;
  bool cache_known_ = false;
  uint64_t offset_ = 0;
  uint64_t t0_ = 0;
  int64_t ns0_ = 0;
  CacheVerdict cache_;
};

// Looks `fd` up, classifying it at first use. False when untracked.
bool lookup_fd(int fd, FdInfo* info) noexcept;

// A blocking wait on several descriptors (poll, select, epoll_wait):
// recorded as a data wait when one of them is a producer's channel.
class WaitScope {
 public:
  WaitScope() noexcept;
  // Call for each descriptor waited on before the call.
  void consider(int fd) noexcept;
  void done() noexcept;

 private:
  Guard guard_;
  uint32_t channel_ = 0;
  uint64_t t0_ = 0;
};

// Records [t0, now) as a data wait on `channel` if its writers are
// producers and it lasted long enough.
void record_channel_wait(uint32_t channel, uint64_t t0) noexcept;

}  // namespace stallscope::preload
