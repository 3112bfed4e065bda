// The recording side of every read wrapper: look the descriptor up, time
// the call, and record a storage read (regular files, network sockets:
// socket_reads.hpp) or a part of a message on a producer's channel
// (messages.hpp: hand-offs and data waits).
//
// The common case — an unclassified read of a known regular file — is
// inline in the wrapper, with no call besides the real function's: the
// guard, one table slot, two TSC reads, and the record built in place in
// the thread's buffer (stallscope/internal/inline_records.hpp). Right after a system
// call each page touched again is likely a TLB miss (about 3 ns each,
// docs/performance.md), so the path reads no configuration and calls
// nothing in the recorder's library.
// It neither reads nor writes errno: nothing on it can fail with one (the
// recorder keeps errno across a thread's first event). Classification,
// channels and descriptors not seen yet go out of line, and those paths
// keep errno themselves.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "classify.hpp"
#include "direct_read.hpp"
#include "fd_table.hpp"
#include "stallscope/internal/inline_records.hpp"
#include "shim.hpp"
#include "socket_reads.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::preload {

inline constexpr uint64_t kTablePosition = ~0ull;  // read(): the tracked position
inline constexpr uint64_t kAlwaysClassify = 64u << 10;  // bytes

// Reads left until this thread classifies one (0: none counted yet): one
// read in N is classified, plus every read above kAlwaysClassify. Counted
// down in TLS so that the common read reads no configuration.
extern thread_local constinit uint32_t t_reads_left __attribute__((tls_model("initial-exec")));

class ReadScope {
 public:
  // `offset` is the file offset, or kTablePosition for calls that use and
  // advance the descriptor's position. `len` is the bytes asked for.
  // `nowait`: the call cannot block (MSG_DONTWAIT). `buf`: where the bytes
  // land (contiguous for at least min(len, 8) bytes), or nullptr; read only
  // for channels, whose messages are framed from their first bytes
  // (messages.hpp).
  ReadScope(int fd, uint64_t offset, uint64_t len, bool nowait = false,
            const void* buf = nullptr) noexcept : fd_(fd) {
    if (__builtin_expect(!guard_.entered() || !enabled() || !fd_table().read(fd, &info_), 0)) {
      return;
    }
    if (__builtin_expect(info_.kind == FdKind::kFile, 1)) {
      begin_file(offset, len);
    } else if (info_.kind == FdKind::kSocket) {
      // Inline too: a polling loop's EAGAIN costs the lookup and one TSC read.
      active_ = true;
      t0_ = ticks_now();
    } else {
      begin_other(offset, len, nowait, buf);
    }
  }
  // Records the call that returned `result` (bytes, or -1). Leaves errno
  // as the call set it.
  void done(ssize_t result) noexcept {
    if (__builtin_expect(!active_, 0)) return;
    // A read at end of file returns 0 yet still went to storage (a network
    // round trip on FUSE or NFS): recorded too.
    if (__builtin_expect(info_.kind == FdKind::kFile && !classify_ && result >= 0, 1)) {
      end_file(static_cast<uint64_t>(result));
    } else if (info_.kind == FdKind::kSocket) {
      // EAGAIN, an error, the end of the stream: no event.
      if (result > 0) record_socket_read(fd_, info_, t0_, static_cast<uint64_t>(result));
    } else {
      done_slow(result);
    }
  }
  // True when the read may make its system call itself (direct_read.hpp):
  // a traced read of a regular file on a local or memory filesystem.
  bool direct() const noexcept {
    return active_ && info_.kind == FdKind::kFile &&
           (info_.tier == static_cast<uint8_t>(format::Tier::kLocal) ||
            info_.tier == static_cast<uint8_t>(format::Tier::kMemory)) &&
           g_direct_reads.load(std::memory_order_relaxed);
  }
  ReadScope(const ReadScope&) = delete;
  ReadScope& operator=(const ReadScope&) = delete;

 private:
  void begin_file(uint64_t offset, uint64_t len) noexcept {
    active_ = true;
    advance_ = offset == kTablePosition;
    offset_ = advance_ ? fd_table().position(fd_) : offset;
    if (__builtin_expect(len <= kAlwaysClassify && t_reads_left > 1, 1)) {
      --t_reads_left;
    } else if (classify_due(len)) {
      begin_classified(len);
    }
    // The record's cache lines, fetched for writing while the kernel works:
    // written after the call, they would otherwise wait for the fetch.
    if (auto* b = stallscope_inline_v1_thread_buffer) b->prefetch_head();
    t0_ = ticks_now();
  }
  void end_file(uint64_t bytes) noexcept {
    const uint64_t t1 = ticks_now();
    if (advance_) fd_table().advance(fd_, bytes);
    StorageRead r;
    r.file = info_.path;
    r.bytes = bytes;
    r.offset = (info_.flags & kPositionUnknown) ? 0 : offset_;
    r.tier = static_cast<format::Tier>(info_.tier);
    if (__builtin_expect(classify_, 0)) {
      classified_verdict(bytes);
      r.cache = static_cast<format::Cache>(cache_.cache);
      r.cache_method = static_cast<format::CacheMethod>(cache_.method);
      r.hit_bytes = cache_.hit_bytes;
    }
    stallscope::detail::emit_storage_read(t0_, t1, r);
  }
  // Out of line (io.cpp): a descriptor not seen yet or a channel; the end
  // of the classification countdown; the page-cache state before and after
  // a classified read; every other ending.
  void begin_other(uint64_t offset, uint64_t len, bool nowait, const void* buf) noexcept;
  static bool classify_due(uint64_t len) noexcept;
  void begin_classified(uint64_t len) noexcept;
  void classified_verdict(uint64_t bytes) noexcept;
  void done_slow(ssize_t result) noexcept;

  Guard guard_;
  int fd_;
  FdInfo info_;
  bool active_ = false;
  bool advance_ = false;
  bool classify_ = false;
  bool cache_known_ = false;
  uint64_t offset_ = 0;   // a channel's read: the bytes asked for
  uint64_t t0_ = 0;
  const void* buf_ = nullptr;  // a channel's read: its buffer
  int64_t ns0_ = 0;
  CacheVerdict cache_;
};

// Looks `fd` up, classifying it at first use. False when untracked.
bool lookup_fd(int fd, FdInfo* info) noexcept;

// A blocking wait on several descriptors (poll, select, epoll_wait): when
// one of them is a producer's channel, the start of the message read next
// (messages.hpp), whose data wait it then is part of.
class WaitScope {
 public:
  WaitScope() noexcept;
  // Call for each descriptor waited on before the call; `input`: waited on
  // for reading.
  void consider(int fd, bool input = true) noexcept;
  void done() noexcept;

 private:
  Guard guard_;
  uint32_t channel_ = 0;
  bool epoll_ = false;       // channel_ is one of those an epoll instance watches
  int socket_ = -1;          // the one network socket waited on for input
  bool sockets_ = false;     // more than one: the wait is no single read's
  uint64_t t0_ = 0;
};

}  // namespace stallscope::preload
