// stallscope loader — the data path: storage reads, preprocessing, staging
// and H2D, every stage recorded through libtrace.
//
// Quickstart:
//
//   #include <stallscope/loader/loader.hpp>
//   namespace sl = stallscope::loader;
//   sl::Dataset ds;
//   sl::Config cfg;
//   std::string err;
//   if (sl::Dataset::from_directory("/data/train", &ds, &err) != 0 ||
//       sl::apply_env(cfg, &err) != 0) die(err);
//   sl::Pipeline p;
//   p.transform = [](sl::Sample& s) { decode(s); return 0; };
//   std::unique_ptr<sl::Loader> loader;
//   if (sl::Loader::create(std::move(ds), cfg, std::move(p), &loader, &err) != 0) die(err);
//   for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader->start_epoch(epoch);
//     sl::Batch b;
//     int rc;
//     while ((rc = loader->next_batch(&b)) == 0) train(b.host, b.device);
//     if (rc < 0) die(loader->error());   // names the file and offset
//   }
//
// Threads: per epoch an I/O thread (owns the io_uring ring or the pread
// pool; ends once the epoch is read) and a preprocessing thread; with a
// transform, a oneTBB task_arena of Config::workers runs the transforms and
// the in-order collate (one parallel_pipeline per epoch), without one the
// preprocessing thread collates alone; the device's copy thread.
// next_batch() is called from one consumer thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/loader/config.hpp"
#include "stallscope/loader/dataset.hpp"
#include "stallscope/loader/export.hpp"
#include "stallscope/loader/sys.hpp"

namespace stallscope::loader {

// One sample of a batch. `bytes` views the read buffer (no copy was made);
// a transform may rewrite it in place, or fill `output` and point `bytes`
// at it. Valid until the batch is released.
struct Sample {
  uint64_t index = 0;  // dataset index
  std::span<std::byte> bytes;
  std::vector<std::byte> output;
};

// Per sample, on a worker: 0, or -errno (the error policy applies).
using TransformFn = std::function<int(Sample&)>;
// Per batch, on a worker: writes the batch into `dst` (staging memory);
// returns bytes written or -errno (-ENOSPC when `dst` is too small).
using CollateFn = std::function<int64_t(std::span<const Sample>, std::span<std::byte> dst)>;

struct Pipeline {
  TransformFn transform;       // empty: samples pass unchanged
  CollateFn collate;           // empty: concatenation in sample order
  uint64_t staging_bytes = 0;  // per batch; 0 = the largest raw batch of the dataset
};

// A delivered batch; valid until the next next_batch() or release().
struct Batch {
  uint64_t id = 0;                  // trace batch id: (epoch << 32) + index + 1
  uint64_t index = 0;               // position in the epoch
  std::span<Sample> samples;        // in plan order (skipped ones removed)
  std::span<const std::byte> host;  // collated bytes in staging memory
  void* device = nullptr;           // device copy (null: emulated or no device)
  uint32_t skipped = 0;             // samples dropped by the skip policy
};

inline constexpr int kEndOfEpoch = 1;

struct LoaderStats {
  uint64_t reads = 0;              // read requests completed (one per chunk)
  uint64_t bytes = 0;              // bytes read from storage
  uint64_t retries = 0;            // resubmissions after -EAGAIN/-EINTR/-ECANCELED
  uint64_t short_reads = 0;        // remainders resubmitted after a short count
  uint64_t stray_completions = 0;  // completions for no request in flight (ignored)
  uint64_t direct_fallbacks = 0;   // files read buffered after O_DIRECT was refused
  uint64_t fixed_reads = 0;        // reads into registered buffers
  uint64_t skipped_samples = 0;
  uint64_t batches = 0;
  uint64_t cache_hit_bytes = 0;
  uint64_t cache_miss_bytes = 0;
  // CPU time (user + system, ns) of the loader's own threads over all
  // epochs: the I/O thread (submission, completions, the kernel's work done
  // inline for io_uring reads) and the preprocessing thread (serial stages;
  // with a transform also its share of the pool's work). Not included: pool
  // worker threads, io_uring's io-wq workers, pread threads, the consumer.
  uint64_t io_thread_cpu_ns = 0;
  uint64_t prep_thread_cpu_ns = 0;
};

class Loader {
 public:
  // Builds a loader; starts no epoch. Runs the storage probe unless
  // cfg.probe is false. 0 or -errno with *error set.
  STALLSCOPE_LOADER_API static int create(Dataset ds, const Config& cfg, Pipeline p,
                                          std::unique_ptr<Loader>* out, std::string* error,
                                          Sys& sys = real_sys()) noexcept;
  STALLSCOPE_LOADER_API ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts epoch `epoch` (stopping a running one). 0 or -errno.
  STALLSCOPE_LOADER_API int start_epoch(uint64_t epoch) noexcept;
  // The next batch in order: 0, kEndOfEpoch, or -errno (error() names the
  // file and offset; with policy fail the epoch is over). Records a
  // data_wait span for the time it blocked. Releases the previous batch.
  STALLSCOPE_LOADER_API int next_batch(Batch* out) noexcept;
  // Gives the current batch's memory back early.
  STALLSCOPE_LOADER_API void release() noexcept;
  // Ends the running epoch at once; in-flight reads are drained, nothing
  // leaks; next_batch() returns -ECANCELED until the next start_epoch().
  STALLSCOPE_LOADER_API void stop() noexcept;

  STALLSCOPE_LOADER_API const std::string& error() const noexcept;
  STALLSCOPE_LOADER_API LoaderStats stats() const noexcept;
  STALLSCOPE_LOADER_API std::string_view backend() const noexcept;
  STALLSCOPE_LOADER_API std::string_view device() const noexcept;
  STALLSCOPE_LOADER_API size_t batches_per_epoch() const noexcept;

  struct Impl;

 private:
  explicit Loader(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stallscope::loader
