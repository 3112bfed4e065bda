// Preprocessing on the pool's pipeline (preprocess_pool.hpp): the error
// policy for samples that failed to read (input stage), the user transform
// per group of samples (one preprocess span per group), then in batch order
// the collate into staging memory (one span), the H2D copy and batch_ready.
// Without a transform there is nothing to run in parallel: the same input
// and output stages run in order, no pool — on the I/O thread while they
// cost less than handing a batch to another thread, else on the
// preprocessing thread.
#include <errno.h>
#include <pthread.h>

#include <chrono>
#include <cstring>

#include "loader_impl.hpp"

namespace stallscope::loader {

namespace {

// Applies the error policy to sample `i`: false when the batch must fail.
bool on_sample_error(Loader::Impl& L, BatchState& b, int err, const std::string& text) {
  if (L.cfg.on_error == ErrorPolicy::kFail) {
    if (b.err == 0) {
      b.err = err < 0 ? err : -EIO;
      b.error = text;
    }
    return false;
  }
  ++b.skipped;
  const uint64_t total = ++L.skipped;
  if (enabled()) {
    record_counter(L.names.skipped, static_cast<double>(total));
    if (total <= 100) record_mark(intern("loader: skipped sample: " + text));
  }
  return true;
}

int64_t concatenate(std::span<const Sample> samples, std::span<std::byte> dst) {
  uint64_t at = 0;
  for (const Sample& s : samples) {
    if (s.bytes.size() > dst.size() - at) return -ENOSPC;
    if (!s.bytes.empty()) std::memcpy(dst.data() + at, s.bytes.data(), s.bytes.size());
    at += s.bytes.size();
  }
  return static_cast<int64_t>(at);
}

// Samples that were read without error, in plan order.
bool gather_samples(Loader::Impl& L, BatchState& b) {
  b.samples.clear();
  b.samples.reserve(b.reads.size());
  for (const auto& r : b.reads) {
    if (r.err != 0) {
      if (!on_sample_error(L, b, r.err, r.error)) return false;
      continue;
    }
    Sample s;
    s.index = r.trace_sample - 1;
    s.bytes = {r.view, static_cast<size_t>(r.length)};
    b.samples.push_back(std::move(s));
  }
  return true;
}

// oneTBB's workers are created by whichever thread first needed one (often
// the I/O thread, through wake()) and inherit its name; the first stage a
// worker runs for the loader renames it — before it records anything, so
// its trace track is named right — for traces and per-thread CPU figures.
void name_worker(Loader::Impl& L) noexcept {
  if (!L.pool) return;  // no workers: the stages run on the I/O or prep thread
  thread_local bool named = false;
  if (named) return;
  named = true;
  if (!pthread_equal(pthread_self(), L.prep_self))
    pthread_setname_np(pthread_self(), "ss-loader-work");
}

// Runs the transform on samples [g.begin, g.end) of the batch: one
// preprocess span per group, with the worker and the first sample id.
void transform_group(Loader::Impl& L, BatchState& b, const detail::Group& g) {
  if (!L.pipe.transform || g.end == g.begin) return;
  name_worker(L);
  const Ticks t0 = ticks_now();
  for (size_t i = g.begin; i < g.end && !L.cancel.load(std::memory_order_relaxed); ++i) {
    try {
      b.rc[i] = L.pipe.transform(b.samples[i]);
    } catch (...) {
      b.rc[i] = -ECANCELED;
    }
  }
  if (enabled())
    record_preprocess(L.names.transform, t0, ticks_now(),
                      {b.samples[g.begin].index + 1, b.id, static_cast<uint32_t>(g.end - g.begin),
                       detail::PreprocessPool::worker_index()});
}

// Drops samples whose transform failed (error policy), keeping the order.
bool keep_transformed(Loader::Impl& L, BatchState& b) {
  size_t keep = 0;
  for (size_t i = 0; i < b.samples.size(); ++i) {
    if (b.rc[i] != 0 && !on_sample_error(L, b, b.rc[i],
                                         "sample " + std::to_string(b.samples[i].index) +
                                             ": transform failed: " + std::strerror(-b.rc[i])))
      return false;
    if (b.rc[i] != 0) continue;
    if (keep != i) b.samples[keep] = std::move(b.samples[i]);  // never a self-move
    ++keep;
  }
  b.samples.resize(keep);
  return true;
}

bool collate(Loader::Impl& L, BatchState& b, Slot& slot) {
  const Ticks t0 = ticks_now();
  std::span<std::byte> dst(static_cast<std::byte*>(slot.staging.data), slot.staging.bytes);
  int64_t n;
  try {
    n = L.pipe.collate ? L.pipe.collate(b.samples, dst) : concatenate(b.samples, dst);
  } catch (...) {
    n = -ECANCELED;
  }
  if (n < 0) {
    b.err = static_cast<int>(n);
    b.error = "batch " + std::to_string(b.index) + ": collate failed: " + std::strerror(-b.err);
    return false;
  }
  b.host_bytes = static_cast<uint64_t>(n);
  if (enabled() && !b.samples.empty())
    record_preprocess(L.names.collate, t0, ticks_now(),
                      {b.samples.front().index + 1, b.id, static_cast<uint32_t>(b.samples.size()),
                       detail::PreprocessPool::worker_index()});
  return true;
}

}  // namespace

// Pipeline input: the next batch in order once its reads are done (parked,
// holding no worker, until then); nullptr at the end or on cancel.
void* Loader::Impl::prep_next(size_t* items) noexcept {
  name_worker(*this);
  if (prep_next_index >= n_batches) return nullptr;
  const uint64_t k = prep_next_index;
  BatchState& b = slots[k % slots.size()].batch;
  wait_reads(b, k);
  if (cancel.load()) return nullptr;
  ++prep_next_index;
  b.prep_ok = false;
  try {
    b.prep_ok = gather_samples(*this, b);
    b.rc.assign(b.samples.size(), 0);
  } catch (...) {
    b.prep_ok = false;
    if (b.err == 0) b.err = -ENOMEM, b.error = "loader: out of memory";
  }
  *items = b.prep_ok ? b.samples.size() : 0;
  return &b;
}

void Loader::Impl::prep_work(const detail::Group& g) noexcept {
  transform_group(*this, *static_cast<BatchState*>(g.batch), g);
}

// Pipeline output, in batch order: collate, H2D, batch_ready.
void Loader::Impl::prep_finish(void* batch) noexcept {
  finish_stages(batch);
  mark_ready(static_cast<BatchState*>(batch));
}

// The output stage up to handing the batch to the consumer.
void Loader::Impl::finish_stages(void* batch) noexcept {
  name_worker(*this);
  BatchState* b = static_cast<BatchState*>(batch);
  Slot& slot = slots[b->index % slots.size()];
  if (!cancel.load() && b->prep_ok && keep_transformed(*this, *b) && collate(*this, *b, slot)) {
    b->copy = device ? device->copy_h2d(slot.staging, b->host_bytes, b->id) : CopyTicket{};
    try {
      b->trace_ids.clear();
      for (const Sample& s : b->samples) b->trace_ids.push_back(s.index + 1);
    } catch (...) {
    }
    if (enabled()) record_batch_ready(ticks_now(), b->id, b->trace_ids);
  }
}

// Returns once batch `index` is fully read or the epoch is cancelled. In
// the pipeline the input stage parks without holding a worker; without a
// pool the preprocessing thread sleeps on prep_cv.
void Loader::Impl::wait_reads(const BatchState& b, uint64_t index) noexcept {
  const auto ready = [&] {
    return b.read_seq.load(std::memory_order_acquire) == index + 1 || cancel.load();
  };
  if (pool) return pool->wait_until(ready);
  std::unique_lock lock(prep_mu);
  prep_cv.wait(lock, ready);
}

// After a batch's reads are done or cancel was set.
void Loader::Impl::wake_prep() noexcept {
  if (pool) return pool->wake();
  { std::lock_guard lock(prep_mu); }  // a waiter between its check and its sleep sees it
  prep_cv.notify_one();
}

// Without a transform: one batch's output stage, timed up to the wake-up
// of the consumer, which may run at once on this core in this thread's
// place (that wait is the consumer's work, not the stages').
void Loader::Impl::serial_batch(void* batch) noexcept {
  const auto t0 = std::chrono::steady_clock::now();
  finish_stages(batch);
  serial_cost.add(
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  mark_ready(static_cast<BatchState*>(batch));
}

// Without a transform, on the prep thread: each batch's stages in order,
// once the I/O thread handed them off (or from the start of the epoch when
// they were too slow for it). A pool would add nothing but its workers'
// idle spinning, which between the batches of a storage-bound epoch costs
// more CPU than the batches' work.
void Loader::Impl::run_serial() noexcept {
  {
    std::unique_lock lock(prep_mu);
    prep_cv.wait(lock, [&] { return prep_handoff || prep_io_done || cancel.load(); });
    if (!prep_handoff) return;  // the I/O thread ran them all, or the epoch was stopped
  }
  size_t items = 0;
  while (void* b = prep_next(&items)) serial_batch(b);
}

// Without a transform, on the I/O thread after a batch's last read (its
// freed slots already resubmitted): the stages of every batch read so far,
// in order. Once they prove slower than a hand-off the rest of the epoch's
// go to the prep thread.
void Loader::Impl::run_stages_inline() noexcept {
  while (io_runs_stages && prep_next_index < n_batches) {
    const uint64_t k = prep_next_index;
    if (slots[k % slots.size()].batch.read_seq.load(std::memory_order_acquire) != k + 1) return;
    size_t items = 0;
    void* b = prep_next(&items);  // read: returns at once
    if (b == nullptr) return;     // cancelled
    serial_batch(b);
    if (serial_cost.too_slow_for_io()) {
      io_runs_stages = false;
      {
        std::lock_guard lock(prep_mu);
        prep_handoff = true;
      }
      prep_cv.notify_one();
    }
  }
}

// The I/O thread ends: a prep thread still waiting for a hand-off ends too.
void Loader::Impl::end_inline() noexcept {
  if (pool) return;
  {
    std::lock_guard lock(prep_mu);
    prep_io_done = true;
  }
  prep_cv.notify_one();
}

void Loader::Impl::run_prep() noexcept {
  prep_self = pthread_self();  // before any stage runs: name_worker() tells it apart
  pthread_setname_np(pthread_self(), "ss-loader-prep");
  {
    std::lock_guard lock(mu);
    prep_cpu.begin();
  }
  try {
    if (pool) {
      detail::PoolStages stages{[this](size_t* n) { return prep_next(n); },
                                [this](const detail::Group& g) { prep_work(g); },
                                [this](void* b) { prep_finish(b); }};
      pool->run(stages, 4 * static_cast<size_t>(cfg.workers));
    } else {
      run_serial();
    }
  } catch (...) {
    std::lock_guard lock(mu);
    error = "loader: preprocessing pipeline failed";
    stop = true;
    ready_cv.notify_all();
  }
  std::lock_guard lock(mu);
  prep_cpu.end();
}

// The consumer is woken after the lock is released: woken under it, it
// would only go back to sleep on the lock (two more futex calls and a
// context switch per batch). The condition variable outlives this call:
// threads are joined before the loader is destroyed.
void Loader::Impl::mark_ready(BatchState* b) noexcept {
  {
    std::lock_guard lock(mu);
    b->ready = true;
    ++ready_count;
    if (enabled()) record_counter(names.batches_ready, ready_count);
  }
  ready_cv.notify_all();
}

}  // namespace stallscope::loader
