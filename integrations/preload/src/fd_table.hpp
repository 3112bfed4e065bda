// Lock-free table of what each file descriptor is, kept through every call
// that creates, duplicates or closes descriptors. Each slot is a seqlock:
// its sequence number is the slot's generation, bumped by every change, so
// a reader never sees half an update and a reused descriptor number never
// inherits the path of the file it held before. Descriptors the shim did
// not see open (inherited, opened through a path it does not wrap) are
// classified at their first use with one fstat.
#pragma once

#include <atomic>
#include <cstdint>

namespace stallscope::preload {

enum class FdKind : uint8_t {
  kUnseen = 0,   // not known: classify at first use
  kFile = 1,     // a regular file on a storage filesystem: reads recorded
  kOther = 2,    // ignored: /proc, devices, directories, terminals
  kChannel = 3,  // a pipe, socketpair or eventfd made in this process tree
  kForeign = 4,  // a pipe or socket from elsewhere (launcher, network)
  kEpoll = 5,    // an epoll instance (flag kWatchesChannel when it does)
  kSocket = 6,   // an AF_INET/AF_INET6 stream or datagram socket: reads are
                 // network storage (socket_reads.hpp); path = peer name, 0
                 // until its first recorded read
};

enum FdFlags : uint8_t {
  kWatchesChannel = 1u << 0,  // epoll: a channel was added to it
  kNonBlocking = 1u << 1,     // opened O_NONBLOCK: reads never wait
  kPositionUnknown = 1u << 2, // O_APPEND: offsets are not tracked
};

struct FdInfo {
  uint32_t gen = 0;     // the slot's generation when read
  FdKind kind = FdKind::kUnseen;
  uint8_t tier = 0;     // format::Tier
  uint8_t flags = 0;    // FdFlags
  uint32_t path = 0;    // interned path (kFile), peer name (kSocket)
  uint32_t channel = 0; // channel board slot (kChannel)
};

inline constexpr int kMaxTrackedFd = 1 << 16;  // higher descriptors pass untraced

class FdTable {
 public:
  // The slot's current contents; false while a writer holds it or when fd is
  // out of range (then the call passes through untraced). Inline: every
  // traced read starts here.
  inline bool read(int fd, FdInfo* out) const noexcept;
  // Replaces the slot's contents, bumping its generation. `expect_gen`
  // (when not ~0u) makes the write conditional: lazy classification must
  // not overwrite what an open() wrote meanwhile.
  bool write(int fd, const FdInfo& info, uint32_t expect_gen = ~0u) noexcept;
  void forget(int fd) noexcept { write(fd, FdInfo{}); }
  void forget_range(unsigned lo, unsigned hi) noexcept;
  void copy(int from, int to) noexcept;
  // File position for read()/stdio offsets (approximate under races).
  uint64_t position(int fd) const noexcept {
    return in_range(fd) ? slots_[fd].pos.load(std::memory_order_relaxed) : 0;
  }
  void set_position(int fd, uint64_t pos) noexcept {
    if (in_range(fd)) slots_[fd].pos.store(pos, std::memory_order_relaxed);
  }
  void advance(int fd, uint64_t bytes) noexcept {
    if (in_range(fd)) slots_[fd].pos.fetch_add(bytes, std::memory_order_relaxed);
  }
  // Page-cache method learnt at the first classified read (0 = not yet).
  uint8_t cache_method(int fd) const noexcept;
  void set_cache_method(int fd, uint8_t method) noexcept;
  void add_flags(int fd, uint8_t flags) noexcept;

 private:
  // 32 bytes in a 64-byte aligned table: a slot never straddles two cache
  // lines. Padded by a member: with alignas on the struct (padding bytes)
  // clang initializes the table at load time, after the shim's constructor
  // may have started threads that use it. (constinit cannot say so: clang's
  // constant evaluator gives up on 65536 slots.)
  struct Slot {
    std::atomic<uint32_t> seq{0};  // odd while being written
    std::atomic<uint32_t> path{0};
    std::atomic<uint32_t> channel{0};
    std::atomic<uint8_t> kind{0}, tier{0}, flags{0}, method{0};
    std::atomic<uint64_t> pos{0};
    uint64_t spare = 0;
  };
  static_assert(sizeof(Slot) == 32);
  static bool in_range(int fd) noexcept { return fd >= 0 && fd < kMaxTrackedFd; }
  // One attempt at a consistent copy of the slot; false while written.
  static bool try_read(const Slot& s, FdInfo* out) noexcept {
    const uint32_t s1 = s.seq.load(std::memory_order_acquire);
    if (s1 & 1u) return false;
    out->gen = s1 >> 1;
    out->kind = static_cast<FdKind>(s.kind.load(std::memory_order_relaxed));
    out->tier = s.tier.load(std::memory_order_relaxed);
    out->flags = s.flags.load(std::memory_order_relaxed);
    out->path = s.path.load(std::memory_order_relaxed);
    out->channel = s.channel.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    return s.seq.load(std::memory_order_relaxed) == s1;
  }
  // The retries of read() once a writer was seen.
  bool read_contended(int fd, FdInfo* out) const noexcept;
  alignas(64) Slot slots_[kMaxTrackedFd];
};

inline bool FdTable::read(int fd, FdInfo* out) const noexcept {
  if (!in_range(fd)) return false;
  if (__builtin_expect(try_read(slots_[fd], out), 1)) return true;
  return read_contended(fd, out);
}

extern FdTable g_fd_table;
inline FdTable& fd_table() noexcept { return g_fd_table; }

}  // namespace stallscope::preload
