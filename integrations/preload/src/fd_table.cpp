#include "fd_table.hpp"

#include <sched.h>

namespace stallscope::preload {

namespace {
constexpr int kWriterSpins = 1000;  // then yield; writers hold a slot for nanoseconds
constexpr int kReaderRetries = 256;  // ~a few µs of pauses, then the call goes untraced

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

// Zero-filled static storage (every slot kUnseen, generation 0). Should a
// compiler initialize it at load time rather than at compile time, a call
// traced before that only loses its slot, classified again at next use.
FdTable g_fd_table;

bool FdTable::read_contended(int fd, FdInfo* out) const noexcept {
  const Slot& s = slots_[fd];
  // A writer holds a slot for a few stores (a lazy classification by another
  // thread, an open): retry a bounded number of times so that a read racing
  // it is still traced, but never wait on a writer that was preempted.
  for (int attempt = 1; attempt < kReaderRetries; ++attempt) {
    cpu_relax();
    if (try_read(s, out)) return true;
  }
  return false;
}

bool FdTable::write(int fd, const FdInfo& info, uint32_t expect_gen) noexcept {
  if (!in_range(fd)) return false;
  Slot& s = slots_[fd];
  uint32_t cur = s.seq.load(std::memory_order_relaxed);
  for (int spin = 0;; ++spin) {
    if (expect_gen != ~0u && (cur >> 1) != expect_gen) return false;
    if (!(cur & 1u) && s.seq.compare_exchange_weak(cur, cur + 1, std::memory_order_acquire,
                                                   std::memory_order_relaxed)) {
      break;
    }
    if (spin > kWriterSpins) sched_yield();
    cur = s.seq.load(std::memory_order_relaxed);
  }
  s.kind.store(static_cast<uint8_t>(info.kind), std::memory_order_relaxed);
  s.tier.store(info.tier, std::memory_order_relaxed);
  s.flags.store(info.flags, std::memory_order_relaxed);
  s.path.store(info.path, std::memory_order_relaxed);
  s.channel.store(info.channel, std::memory_order_relaxed);
  s.method.store(0, std::memory_order_relaxed);
  s.pos.store(0, std::memory_order_relaxed);
  s.seq.store(cur + 2, std::memory_order_release);
  return true;
}

void FdTable::forget_range(unsigned lo, unsigned hi) noexcept {
  for (unsigned fd = lo; fd <= hi && fd < unsigned(kMaxTrackedFd); ++fd) {
    // Untouched slots stay untouched: closing 0..~0U must not fault in the table.
    if (slots_[fd].seq.load(std::memory_order_relaxed) == 0) continue;
    forget(static_cast<int>(fd));
  }
}

void FdTable::copy(int from, int to) noexcept {
  FdInfo info;
  if (!read(from, &info)) info = FdInfo{};
  const uint64_t pos = position(from);
  const uint8_t method = cache_method(from);
  if (write(to, info)) {
    set_position(to, pos);
    set_cache_method(to, method);
  }
}

uint8_t FdTable::cache_method(int fd) const noexcept {
  return in_range(fd) ? slots_[fd].method.load(std::memory_order_relaxed) : 0;
}
void FdTable::set_cache_method(int fd, uint8_t method) noexcept {
  if (in_range(fd)) slots_[fd].method.store(method, std::memory_order_relaxed);
}
void FdTable::add_flags(int fd, uint8_t flags) noexcept {
  if (in_range(fd)) slots_[fd].flags.fetch_or(flags, std::memory_order_relaxed);
}

}  // namespace stallscope::preload
