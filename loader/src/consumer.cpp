// The consumer side of the loader: next_batch(), release(), stop(), stats.
#include <errno.h>

#include "loader_impl.hpp"

namespace stallscope::loader {

void Loader::release() noexcept {
  Impl& L = *impl_;
  {
    std::lock_guard lock(L.mu);
    if (!L.holding) return;
    L.holding = false;
    Slot& s = L.slots[(L.next - 1) % L.slots.size()];
    s.batch.ready = false;
    L.free_arenas.push_back(s.arena);  // capacity for every arena: no allocation
    ++L.released;
  }
  L.io_cv.notify_all();  // outside the lock: the I/O thread does not wake onto a held lock
}

int Loader::next_batch(Batch* out) noexcept {
  Impl& L = *impl_;
  release();
  const Ticks t0 = ticks_now();
  std::unique_lock lock(L.mu);
  if (L.stopped) {  // batches read before stop() are not delivered after it
    if (L.error.empty()) L.error = "loader stopped";
    return -ECANCELED;
  }
  if (!L.error.empty() && L.stop) return -EIO;
  if (L.next >= L.n_batches) return kEndOfEpoch;
  Slot& s = L.slots[L.next % L.slots.size()];
  L.ready_cv.wait(lock, [&] { return s.batch.ready || L.stop; });
  if (!s.batch.ready) {  // stopped: by stop(), or by a backend failure
    if (L.error.empty()) L.error = "loader stopped";
    return L.error == "loader stopped" ? -ECANCELED : -EIO;
  }
  BatchState& b = s.batch;
  --L.ready_count;
  if (enabled()) record_counter(L.names.batches_ready, L.ready_count);
  if (b.err != 0) {
    L.error = b.error;
    L.stop = true;  // policy fail: the epoch ends with this error
    L.io_cv.notify_all();
    return b.err;
  }
  L.holding = true;
  ++L.next;
  lock.unlock();
  if (L.device && b.copy.seq != 0) L.device->wait(b.copy);
  if (enabled()) record_data_wait(t0, ticks_now(), b.id);
  ++L.batches;
  out->id = b.id;
  out->index = b.index;
  out->samples = b.samples;
  out->host = {static_cast<const std::byte*>(s.staging.data), b.host_bytes};
  out->device = s.staging.device;
  out->skipped = b.skipped;
  return 0;
}

void Loader::stop() noexcept { impl_->stop_epoch(); }

const std::string& Loader::error() const noexcept { return impl_->error; }

LoaderStats Loader::stats() const noexcept {
  Impl& L = *impl_;
  std::lock_guard lock(L.mu);
  LoaderStats s;
  s.reads = L.io_stats.reads + L.past_io.reads;
  s.bytes = L.io_stats.bytes + L.past_io.bytes;
  s.retries = L.io_stats.retries + L.past_io.retries;
  s.short_reads = L.io_stats.short_reads + L.past_io.short_reads;
  s.stray_completions = L.io_stats.stray + L.past_io.stray;
  s.cache_hit_bytes = L.io_stats.hit_bytes + L.past_io.hit_bytes;
  s.cache_miss_bytes = L.io_stats.miss_bytes + L.past_io.miss_bytes;
  s.direct_fallbacks = L.direct_fallbacks;
  s.fixed_reads = L.fixed_reads;
  s.skipped_samples = L.skipped.load();
  s.batches = L.batches.load();
  s.io_thread_cpu_ns = L.io_cpu.total_ns();
  s.prep_thread_cpu_ns = L.prep_cpu.total_ns();
  return s;
}

std::string_view Loader::backend() const noexcept { return impl_->reader->name(); }
std::string_view Loader::device() const noexcept {
  return impl_->device ? impl_->device->name() : "none";
}
size_t Loader::batches_per_epoch() const noexcept { return impl_->n_batches; }

}  // namespace stallscope::loader
