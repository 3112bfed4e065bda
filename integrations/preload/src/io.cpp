#include "io.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "channels.hpp"

namespace stallscope::preload {

thread_local constinit uint32_t t_reads_left __attribute__((tls_model("initial-exec"))) = 0;

namespace {

thread_local pid_t t_tid __attribute__((tls_model("initial-exec"))) = 0;

pid_t current_tid() noexcept {
  if (t_tid == 0) t_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return t_tid;
}

uint32_t wait_name(uint8_t writers) {
  static const uint32_t forked = stallscope_name_intern("channel written by a forked worker");
  static const uint32_t thread = stallscope_name_intern("channel written by a producer thread");
  return (writers & kWriterForked) ? forked : thread;
}

// The out-of-line paths make system calls (fstat, cachestat, gettid) whose
// errno must not reach the traced program.
struct ErrnoKeeper {
  int saved = errno;
  ~ErrnoKeeper() { errno = saved; }
};

}  // namespace

void io_reset_tid_after_fork() noexcept { t_tid = 0; }

bool lookup_fd(int fd, FdInfo* info) noexcept {
  if (!fd_table().read(fd, info)) return false;
  if (info->kind == FdKind::kUnseen) *info = classify_unseen(fd, *info);
  return true;
}

void ReadScope::begin_other(uint64_t offset, uint64_t len, bool nowait) noexcept {
  const ErrnoKeeper keep_errno;
  if (info_.kind == FdKind::kUnseen) info_ = classify_unseen(fd_, info_);
  if (info_.kind == FdKind::kFile) {
    begin_file(offset, len);
  } else if (info_.kind == FdKind::kChannel && !(info_.flags & kNonBlocking) && !nowait) {
    active_ = true;
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
    if (result > 0) record_channel_wait(info_.channel, t0_);
    return;
  }
  if (result >= 0) end_file(static_cast<uint64_t>(result));
}

void record_channel_wait(uint32_t channel, uint64_t t0) noexcept {
  const uint64_t t1 = ticks_now();
  const uint8_t writers = channel_writers(channel, current_tid());
  if (writers == 0) return;  // nobody of ours writes it: not a data wait
  const auto ns = static_cast<int64_t>(static_cast<double>(t1 - t0) * ns_per_tick());
  if (ns < static_cast<int64_t>(config().wait_min_ns)) return;
  format::WorkExt e{};
  e.h.type = static_cast<uint8_t>(format::Ext::kWork);
  e.h.bytes = sizeof e;
  e.h.aux = static_cast<uint32_t>(format::WaitSource::kPipe);
  stallscope_event_record(STALLSCOPE_DATA_WAIT, wait_name(writers), t0, t1, 0, &e, sizeof e);
}

WaitScope::WaitScope() noexcept {
  if (guard_.entered() && enabled()) t0_ = ticks_now();
}

void WaitScope::consider(int fd, bool input) noexcept {
  if (t0_ == 0 || channel_ != 0) return;
  FdInfo info;
  if (!fd_table().read(fd, &info)) return;
  if (info.kind == FdKind::kChannel || info.kind == FdKind::kEpoll) channel_ = info.channel;
  if (info.kind == FdKind::kSocket && input) {
    sockets_ |= socket_ >= 0 && socket_ != fd;
    socket_ = fd;
  }
}

void WaitScope::done() noexcept {
  if (t0_ == 0) return;
  if (channel_ != 0) {
    record_channel_wait(channel_, t0_);
  } else if (socket_ >= 0 && !sockets_) {
    socket_poll_ended(socket_, t0_);
  }
}

}  // namespace stallscope::preload
