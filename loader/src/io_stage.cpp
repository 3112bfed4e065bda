// The I/O thread: plans batches while slots are free, feeds their samples
// to the read engine and hands each fully read batch to the preprocessing
// thread (without a transform, runs its serial stages itself while they
// are cheap: batch_process.cpp). It ends when the epoch's last batch is
// read; on stop it stops planning, drops queued requests and drains the
// requests in flight before any buffer can be freed.
#include <errno.h>

#include <chrono>
#include <cstring>

#include "loader_impl.hpp"
#include "log.hpp"

namespace stallscope::loader {

namespace {

constexpr int kPollMs = 20;
constexpr auto kDrainLimit = std::chrono::seconds(10);

// Lays out the batch's samples in the arena it was given and queues their reads.
void plan_batch(Loader::Impl& L, uint64_t index, uint32_t arena, detail::ReadEngine& engine) {
  Slot& slot = L.slots[index % L.slots.size()];
  slot.arena = arena;
  std::byte* const base = L.arenas[arena].base;
  BatchState& b = slot.batch;
  const size_t first = index * L.cfg.batch_size;
  const size_t n = std::min<size_t>(L.cfg.batch_size, L.plan.samples.size() - first);
  b.index = index;
  b.id = L.batch_id(index);
  b.reads.assign(n, {});
  b.err = 0;
  b.error.clear();
  b.skipped = 0;
  b.ready = false;
  b.read_seq.store(0, std::memory_order_relaxed);
  b.reads_left = static_cast<uint32_t>(n);
  uint64_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t idx = L.plan.samples[first + i];
    const SampleRef& s = L.ds.samples()[idx];
    detail::SampleRead& r = b.reads[i];
    r.file = s.file;
    r.offset = s.offset;
    r.length = s.length;
    r.buf = base + at;
    r.buf_bytes = detail::direct_span(s.offset, s.length);
    r.trace_sample = idx + 1;
    r.trace_batch = b.id;
    r.owner = &b;
    at += (r.buf_bytes + detail::kDirectAlign - 1) & ~(detail::kDirectAlign - 1);
  }
  for (auto& r : b.reads) engine.add(&r);
}

// Copies the engine's counters where stats() reads them. `wait` false:
// skipped when another thread holds the lock (the next round publishes),
// so the I/O thread never sleeps on it between two reads.
void publish(Loader::Impl& L, const detail::ReadEngine& engine, bool wait = true) {
  std::unique_lock lock(L.mu, std::defer_lock);
  if (wait)
    lock.lock();
  else if (!lock.try_lock())
    return;
  L.io_stats = engine.stats();
  L.fixed_reads = L.reader->fixed_reads();
  L.direct_fallbacks = L.files->direct_fallbacks();
}

// On stop: queued requests are dropped, those in flight drained (their
// buffers are about to be reused or freed).
void drain(detail::ReadEngine& engine) {
  engine.cancel_pending();
  const auto deadline = std::chrono::steady_clock::now() + kDrainLimit;
  while (!engine.idle() && std::chrono::steady_clock::now() < deadline) engine.poll(kPollMs);
  if (!engine.idle()) detail::note("reads still in flight after 10 s at shutdown");
}

}  // namespace

// Plans batches into free slots and reads them until every batch of the
// epoch is read (then the thread ends) or the epoch is stopped.
void Loader::Impl::run_io() noexcept {
  pthread_setname_np(pthread_self(), "ss-loader-io");
  {
    std::lock_guard lock(mu);
    io_cpu.begin();
  }
  uint64_t planned = 0;
  const detail::ReadEngine* reads = nullptr;
  detail::ReadEngine engine(*reader, *files, cfg.read_size, [&](detail::SampleRead* s) {
    auto* b = static_cast<BatchState*>(s->owner);
    if (--b->reads_left > 0) return;
    publish(*this, *reads);  // stats() covers every batch that was handed on
    b->read_seq.store(b->index + 1, std::memory_order_release);
    if (io_runs_stages)
      run_stages_inline();
    else
      wake_prep();
  });
  reads = &engine;
  uint32_t last_in_flight = UINT32_MAX;
  bool ended = false;  // by stop or a backend failure, not by the last read
  for (;;) {
    // With reads in flight the thread does not sleep on the lock: when
    // another thread holds it, stop and planning are looked at next round.
    std::unique_lock planning(mu, std::defer_lock);
    if (engine.in_flight() == 0)
      planning.lock();
    else
      (void)planning.try_lock();
    if (planning.owns_lock()) {
      if (!stop && engine.idle() && planned < n_batches && planned >= released + slots.size())
        io_cv.wait_for(planning, std::chrono::milliseconds(kPollMs));
      if ((ended = stop)) break;
      if (planned == n_batches && engine.idle()) break;  // the epoch is read
      // A batch is planned (and takes an arena) only while fewer requests
      // than the queue depth wait: one ring's worth is always ready, and
      // arenas stay free for the batches after it, not taken in advance.
      while (planned < n_batches && planned < released + slots.size() &&
             engine.queued() < reader->capacity()) {
        // A batch released or not planned for each free slot: never empty.
        const uint32_t arena = free_arenas.back();  // the last released: still in cache
        free_arenas.pop_back();
        planning.unlock();
        try {
          plan_batch(*this, planned, arena, engine);
        } catch (...) {
          planning.lock();
          free_arenas.push_back(arena);
          break;
        }
        ++planned;
        planning.lock();
      }
      planning.unlock();
    }
    if (const int rc = engine.poll(kPollMs); rc < 0) {
      std::lock_guard lock(mu);
      error = std::string("storage backend ") + std::string(reader->name()) +
              " failed: " + std::strerror(-rc);
      stop = ended = true;
      ready_cv.notify_all();
      break;
    }
    publish(*this, engine, false);
    if (engine.in_flight() != last_in_flight && enabled()) {
      last_in_flight = engine.in_flight();
      record_counter(names.reads_in_flight, last_in_flight);
    }
  }
  if (ended) {
    cancel.store(true);
    drain(engine);
  }
  publish(*this, engine);
  end_inline();
  std::lock_guard lock(mu);
  io_cpu.end();
}

}  // namespace stallscope::loader
