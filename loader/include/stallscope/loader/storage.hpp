// stallscope loader — storage readers.
//
// A StorageReader runs positional reads asynchronously: queue requests with
// submit(), collect results with reap(). Two backends with the same
// contract: io_uring (one ring per reader; readers are used by one thread and
// re-create their ring in a forked child) and a pread thread pool. Results
// are raw — short counts, -EAGAIN, -EINTR, -ECANCELED come back as they
// happened; the loader's read engine resubmits remainders.
//
//   std::string why;
//   auto r = make_reader(Backend::kAuto, {.queue_depth = 32}, real_sys(), &why);
//   r->submit({&req, 1});
//   Completion c[8];
//   int n = r->reap(c, 1, 100);
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "stallscope/loader/config.hpp"
#include "stallscope/loader/export.hpp"
#include "stallscope/loader/sys.hpp"

namespace stallscope::loader {

struct ReadRequest {
  int fd = -1;
  uint64_t offset = 0;
  uint32_t length = 0;
  void* buf = nullptr;     // caller-owned until its completion is reaped
  uint64_t user_data = 0;  // returned unchanged in the completion
  bool nowait = false;     // RWF_NOWAIT: -EAGAIN when not in the page cache
};

struct Completion {
  uint64_t user_data = 0;
  int32_t res = 0;  // bytes read, or -errno
};

struct ReaderOptions {
  uint32_t queue_depth = 32;
  uint32_t pread_threads = 8;
};

// Buffer ranges a reader may register with the kernel (fixed buffers).
struct BufferRange {
  void* base = nullptr;
  uint64_t bytes = 0;
};

class STALLSCOPE_LOADER_API StorageReader {
 public:
  virtual ~StorageReader() = default;
  // Queues up to capacity() - in_flight() requests; returns how many were
  // accepted (>= 0) or -errno. Not thread-safe: one submitting thread.
  virtual int submit(std::span<const ReadRequest> reqs) noexcept = 0;
  // Waits up to timeout_ms for at least `min` completions (0 = poll), fills
  // `out`; returns the count or -errno.
  virtual int reap(std::span<Completion> out, unsigned min, int timeout_ms) noexcept = 0;
  // Offers buffers for registration; 0, or -errno when refused (then reads
  // stay unregistered — never an error for the caller).
  virtual int register_buffers(std::span<const BufferRange> ranges) noexcept = 0;
  virtual uint32_t capacity() const noexcept = 0;
  virtual uint32_t in_flight() const noexcept = 0;
  virtual std::string_view name() const noexcept = 0;
  // Reads that used registered buffers (0 for pread).
  virtual uint64_t fixed_reads() const noexcept { return 0; }
};

STALLSCOPE_LOADER_API std::unique_ptr<StorageReader> make_uring_reader(const ReaderOptions& o,
                                                                       Sys& sys, int* err) noexcept;
STALLSCOPE_LOADER_API std::unique_ptr<StorageReader> make_pread_reader(const ReaderOptions& o,
                                                                       Sys& sys, int* err) noexcept;

// The registry: `want` picks the backend (Config::backend, set from
// STALLSCOPE_LOADER_BACKEND); kAuto tries io_uring, then pread. `*why`
// says which was chosen and why (the loader prints it once). Null only when
// no backend could start.
STALLSCOPE_LOADER_API std::unique_ptr<StorageReader> make_reader(Backend want,
                                                                 const ReaderOptions& o, Sys& sys,
                                                                 std::string* why) noexcept;

}  // namespace stallscope::loader
