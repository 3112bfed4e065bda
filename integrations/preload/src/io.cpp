#include "io.hpp"

#include <cerrno>

#include "channels.hpp"
#include "messages.hpp"

namespace stallscope::preload {

thread_local constinit uint32_t t_reads_left __attribute__((tls_model("initial-exec"))) = 0;

namespace {

// The out-of-line paths make system calls (fstat, cachestat, gettid) whose
// errno must not reach the traced program.
struct ErrnoKeeper {
  int saved = errno;
  ~ErrnoKeeper() { errno = saved; }
};

}  // namespace

bool lookup_fd(int fd, FdInfo* info) noexcept {
  if (!fd_table().read(fd, info)) return false;
  if (info->kind == FdKind::kUnseen) *info = classify_unseen(fd, *info);
  return true;
}

void ReadScope::begin_other(uint64_t offset, uint64_t len, bool nowait,
                            const void* buf) noexcept {
  (void)nowait;  // a read that cannot block still receives a message
  const ErrnoKeeper keep_errno;
  if (info_.kind == FdKind::kUnseen) info_ = classify_unseen(fd_, info_);
  if (info_.kind == FdKind::kFile) {
    begin_file(offset, len);
  } else if (info_.kind == FdKind::kChannel) {
    active_ = true;
    offset_ = len;
    buf_ = buf;
    t0_ = ticks_now();
  } else if (info_.kind == FdKind::kSocket) {
    active_ = true;
    t0_ = ticks_now();
  }
}

bool ReadScope::classify_due(uint64_t len) noexcept {
  const uint32_t every = config().classify_every;
  if (len <= kAlwaysClassify && t_reads_left == 0 && every > 1) {
    t_reads_left = every - 1;  // this thread's first read: the count starts
    return false;
  }
  t_reads_left = every;
  return true;
}

void ReadScope::begin_classified(uint64_t len) noexcept {
  const ErrnoKeeper keep_errno;
  classify_ = true;
  const uint8_t method = fd_table().cache_method(fd_);
  if (info_.tier == static_cast<uint8_t>(format::Tier::kMemory)) {
    cache_ = CacheVerdict{static_cast<uint8_t>(format::Cache::kHit),
                          static_cast<uint8_t>(format::CacheMethod::kTier), len};
    cache_known_ = true;
  } else if (method != static_cast<uint8_t>(format::CacheMethod::kLatency)) {
    cache_known_ = cache_before_read(fd_, offset_, len != 0 ? len : 4096, &cache_);
    if (!cache_known_) {
      fd_table().set_cache_method(fd_, static_cast<uint8_t>(format::CacheMethod::kLatency));
    }
  }
  if (!cache_known_) ns0_ = mono_ns();
}

void ReadScope::classified_verdict(uint64_t bytes) noexcept {
  if (!cache_known_) cache_ = cache_by_latency(bytes, mono_ns() - ns0_);
  if (cache_.hit_bytes > bytes) cache_.hit_bytes = bytes;
}

void ReadScope::done_slow(ssize_t result) noexcept {
  const ErrnoKeeper keep_errno;
  if (info_.kind == FdKind::kChannel) {
    channel_read(fd_, info_, buf_, offset_, result, t0_, ticks_now());
    return;
  }
  if (result >= 0) end_file(static_cast<uint64_t>(result));
}

WaitScope::WaitScope() noexcept {
  if (guard_.entered() && enabled()) t0_ = ticks_now();
}

void WaitScope::consider(int fd, bool input) noexcept {
  if (t0_ == 0 || channel_ != 0) return;
  FdInfo info;
  if (!fd_table().read(fd, &info)) return;
  if (info.kind == FdKind::kChannel || info.kind == FdKind::kEpoll) {
    channel_ = info.channel;
    epoll_ = info.kind == FdKind::kEpoll;
  }
  if (info.kind == FdKind::kSocket && input) {
    sockets_ |= socket_ >= 0 && socket_ != fd;
    socket_ = fd;
  }
}

void WaitScope::done() noexcept {
  if (t0_ == 0) return;
  if (channel_ != 0) {
    channel_polled(channel_, epoll_, t0_, ticks_now());
  } else if (socket_ >= 0 && !sockets_) {
    socket_poll_ended(socket_, t0_);
  }
}

}  // namespace stallscope::preload
