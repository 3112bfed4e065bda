#include "io.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include "channels.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::preload {

namespace {

// Reads since this thread last classified one: one read in N is
// classified (plus every read above kAlwaysClassify).
thread_local uint32_t t_reads __attribute__((tls_model("initial-exec"))) = 0;
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

}  // namespace

void io_reset_tid_after_fork() noexcept { t_tid = 0; }

bool lookup_fd(int fd, FdInfo* info) noexcept {
  if (!fd_table().read(fd, info)) return false;
  if (info->kind == FdKind::kUnseen) *info = classify_unseen(fd, *info);
  return true;
}

ReadScope::ReadScope(int fd, uint64_t offset, uint64_t len) noexcept : fd_(fd) {
  if (!guard_.entered() || !enabled() || !lookup_fd(fd, &info_)) return;
  if (info_.kind == FdKind::kFile) {
    begin_file(offset, len);
  } else if (info_.kind == FdKind::kChannel && !(info_.flags & kNonBlocking)) {
    active_ = true;
    t0_ = ticks_now();
  }
}

void ReadScope::begin_file(uint64_t offset, uint64_t len) noexcept {
  active_ = true;
  advance_ = offset == kTablePosition;
  offset_ = advance_ ? fd_table().position(fd_) : offset;
  classify_ = len > kAlwaysClassify || ++t_reads >= config().classify_every;
  if (classify_) {
    t_reads = 0;
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
  t0_ = ticks_now();
}

void ReadScope::done(ssize_t result) noexcept {
  if (!active_) return;
  if (info_.kind == FdKind::kChannel) {
    if (result > 0) record_channel_wait(info_.channel, t0_);
    return;
  }
  // A read at end of file returns 0 yet still went to storage (a network
  // round trip on FUSE or NFS): recorded too.
  if (result < 0) return;
  end_file(static_cast<uint64_t>(result));
}

void ReadScope::end_file(uint64_t bytes) noexcept {
  const uint64_t t1 = ticks_now();
  if (advance_) fd_table().advance(fd_, bytes);
  StorageRead r;
  r.file = info_.path;
  r.bytes = bytes;
  r.offset = (info_.flags & kPositionUnknown) ? 0 : offset_;
  r.tier = static_cast<format::Tier>(info_.tier);
  if (classify_) {
    if (!cache_known_) cache_ = cache_by_latency(bytes, mono_ns() - ns0_);
    if (cache_.hit_bytes > bytes) cache_.hit_bytes = bytes;
    r.cache = static_cast<format::Cache>(cache_.cache);
    r.cache_method = static_cast<format::CacheMethod>(cache_.method);
    r.hit_bytes = cache_.hit_bytes;
  }
  record_storage_read(t0_, t1, r);
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

void WaitScope::consider(int fd) noexcept {
  if (t0_ == 0 || channel_ != 0) return;
  FdInfo info;
  if (!fd_table().read(fd, &info)) return;
  if (info.kind == FdKind::kChannel || info.kind == FdKind::kEpoll) channel_ = info.channel;
}

void WaitScope::done() noexcept {
  if (t0_ != 0 && channel_ != 0) record_channel_wait(channel_, t0_);
}

}  // namespace stallscope::preload
