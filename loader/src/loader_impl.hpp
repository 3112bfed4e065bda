// The loader's state, shared by its three parts: the I/O thread
// (io_stage.cpp), the preprocessing thread and its tasks
// (batch_process.cpp) and the consumer side (loader.cpp, consumer.cpp).
// Batch k of an epoch lives in slot k % slots;
// the I/O thread starts batch k only once batch k - slots was released, which
// bounds everything in flight to Config::prefetch_batches (+1 held by the
// consumer). A slot's read buffer (its arena) is not fixed: a batch takes
// the arena released last, so a loader whose consumer keeps up reuses two
// or three arenas, still in the CPU's cache, instead of cycling through
// all of them (reads into 20 MiB of buffers ran 7 % slower than into 4 MiB
// at 128 KiB QD 32 on a 2-core VM, docs/performance.md).
#pragma once

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <stallscope/trace.hpp>

#include "file_table.hpp"
#include "preprocess_pool.hpp"
#include "read_engine.hpp"
#include "stallscope/loader/device.hpp"
#include "stallscope/loader/loader.hpp"
#include "stallscope/loader/storage.hpp"

namespace stallscope::loader {

struct BatchState {
  uint64_t index = 0;
  uint64_t id = 0;
  std::vector<detail::SampleRead> reads;
  std::vector<Sample> samples;
  std::vector<uint64_t> trace_ids;
  std::vector<int> rc;                // transform result per sample
  std::atomic<uint64_t> read_seq{0};  // index + 1 once all reads are done
  bool prep_ok = false;               // pipeline only
  uint32_t reads_left = 0;            // I/O thread only
  int err = 0;
  std::string error;
  uint32_t skipped = 0;
  uint64_t host_bytes = 0;
  CopyTicket copy;
  bool ready = false;  // under Impl::mu
};

// Read buffers of one batch, owned by Loader::Impl::arenas.
struct Arena {
  std::byte* base = nullptr;
  uint64_t bytes = 0;
  bool locked = false;
};

struct Slot {
  uint32_t arena = 0;  // Impl::arenas index of the batch's read buffers
  HostBuffer staging;  // collated batch
  BatchState batch;
};

struct Names {
  NameId transform = intern("loader.transform");
  NameId collate = intern("loader.collate");
  NameId reads_in_flight = intern("loader.reads_in_flight");
  NameId batches_ready = intern("loader.batches_ready");
  NameId skipped = intern("loader.skipped_samples");
};

// CPU time of one of the loader's per-epoch threads (I/O, preprocessing):
// the total of the finished ones plus the live one's clock. All calls under
// Impl::mu; begin() and end() on the thread itself, so its clock is read
// only while it runs.
struct ThreadCpu {
  uint64_t done_ns = 0;
  clockid_t clock{};
  bool live = false;
  void begin() noexcept { live = ::pthread_getcpuclockid(::pthread_self(), &clock) == 0; }
  void end() noexcept {
    done_ns += now(CLOCK_THREAD_CPUTIME_ID);
    live = false;
  }
  uint64_t total_ns() const noexcept { return done_ns + (live ? now(clock) : 0); }
  static uint64_t now(clockid_t c) noexcept {
    timespec ts{};
    return ::clock_gettime(c, &ts) == 0 ? uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec)
                                        : 0;
  }
};

// Without a pool, how long a batch's output stage (collate, queueing the
// H2D copy, batch_ready: up to the consumer's wake-up) takes: a decaying
// minimum, so one preempted batch does not move the stages off the I/O
// thread. Written by whichever thread runs the stages — one at a time —
// and read at the start of an epoch, after both threads were joined.
struct SerialCost {
  // Stages cheaper than a hand-off run on the I/O thread: waking the
  // preprocessing thread costs the I/O thread a futex call and the batch a
  // wake-up (24 µs on average from wake-up to running, measured with
  // `perf sched` on 2 busy cores), more than such stages themselves.
  static constexpr double kInlineMaxNs = 20000;
  static constexpr uint32_t kMinSamples = 8;  // measured before moving them off
  double ns = 0;
  uint64_t samples = 0;
  void add(double v) noexcept { ns = samples++ == 0 ? v : std::min(v, 1.25 * ns); }
  // True once enough batches were measured and they cost more than a hand-off.
  bool too_slow_for_io() const noexcept { return samples >= kMinSamples && ns > kInlineMaxNs; }
};

struct Loader::Impl {
  Dataset ds;
  Config cfg;
  Pipeline pipe;
  Sys& sys;
  std::unique_ptr<StorageReader> reader;
  std::unique_ptr<Device> device;
  std::unique_ptr<detail::PreprocessPool> pool;  // null without a transform
  std::unique_ptr<detail::FileTable> files;
  std::vector<Slot> slots;
  std::vector<Arena> arenas;          // one per slot
  std::vector<uint32_t> free_arenas;  // under mu: those of released batches, the last released on top
  Names names;
  std::string backend_why, device_why, error;

  // Epoch state.
  EpochPlan plan;
  uint64_t epoch = 0;
  size_t n_batches = 0;
  std::thread io;
  std::thread prep;       // runs the pool's pipeline, or the serial stages
  pthread_t prep_self{};  // the prep thread, as it sees itself (set by run_prep)
  std::mutex prep_mu;     // without a pool: the prep thread waits for reads
  std::condition_variable prep_cv;
  uint64_t prep_next_index = 0;  // the input stage only
  // Without a pool the serial stages run on the I/O thread (io_runs_stages)
  // until they prove slower than a hand-off; then the I/O thread sets
  // prep_handoff and the prep thread runs them from prep_next_index on.
  // prep_io_done: the I/O thread ended without handing them off.
  bool io_runs_stages = false;  // I/O thread only during an epoch
  bool prep_handoff = false;    // under prep_mu
  bool prep_io_done = false;    // under prep_mu
  SerialCost serial_cost;
  std::mutex mu;
  std::condition_variable ready_cv;  // consumer waits for batches
  std::condition_variable io_cv;     // I/O thread waits for free slots
  uint64_t released = 0;             // batches the consumer gave back
  uint64_t next = 0;                 // next batch for the consumer
  bool holding = false;              // consumer holds batch next-1
  bool stop = false;                 // end the epoch now (stop(), a failure)
  bool stopped = false;              // stop() ended it: next_batch() says -ECANCELED
  std::atomic<bool> cancel{false};   // read by preprocessing tasks
  int ready_count = 0;

  // Stats (atomics: written by several threads).
  std::atomic<uint64_t> skipped{0}, batches{0};
  detail::EngineStats io_stats;  // this epoch's, copied by the I/O thread (under mu)
  detail::EngineStats past_io;   // earlier epochs'
  uint64_t fixed_reads = 0, direct_fallbacks = 0;
  ThreadCpu io_cpu, prep_cpu;  // under mu

  Impl(Dataset d, const Config& c, Pipeline p, Sys& s)
      : ds(std::move(d)), cfg(c), pipe(std::move(p)), sys(s) {}

  int setup(std::string* err) noexcept;
  int alloc_slots() noexcept;
  void free_slots() noexcept;
  void reset_arenas() noexcept;  // every arena free (an epoch's start)
  void attach_facts(const std::string& probe_json) noexcept;
  std::string config_json() const;
  uint64_t max_batch_bytes(bool direct_slack) const noexcept;

  void run_io() noexcept;    // io_stage.cpp
  void run_prep() noexcept;  // batch_process.cpp
  void run_serial() noexcept;
  void run_stages_inline() noexcept;
  void end_inline() noexcept;
  void serial_batch(void* batch) noexcept;
  void wait_reads(const BatchState& b, uint64_t index) noexcept;
  void wake_prep() noexcept;
  void* prep_next(size_t* items) noexcept;
  void prep_work(const detail::Group& g) noexcept;
  void prep_finish(void* batch) noexcept;
  void finish_stages(void* batch) noexcept;
  void stop_epoch() noexcept;
  void mark_ready(BatchState* b) noexcept;
  uint64_t batch_id(uint64_t index) const noexcept { return (epoch << 32) + index + 1; }
};

}  // namespace stallscope::loader
