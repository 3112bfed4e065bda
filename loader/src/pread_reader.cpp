// The pread backend: a pool of threads doing blocking preadv2 calls, with
// the same contract as the io_uring reader (raw results, one submitter).
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "fork_generation.hpp"
#include "stallscope/loader/storage.hpp"

namespace stallscope::loader {

namespace {

class PreadReader final : public StorageReader {
 public:
  PreadReader(const ReaderOptions& o, Sys& sys)
      : sys_(sys), qd_(o.queue_depth), threads_n_(o.pread_threads) {}
  ~PreadReader() override { stop_threads(); }

  int start() noexcept {
    try {
      gen_ = detail::fork_generation();
      stopping_ = false;
      for (uint32_t i = 0; i < threads_n_; ++i) threads_.emplace_back([this] { serve(); });
    } catch (...) {
      stop_threads();
      return -EAGAIN;
    }
    return 0;
  }

  int submit(std::span<const ReadRequest> reqs) noexcept override {
    if (int rc = own_threads(); rc < 0) return rc;
    int accepted = 0;
    {
      std::lock_guard lock(mu_);
      try {
        for (const ReadRequest& r : reqs) {
          if (in_flight_ >= qd_) break;
          queued_.push_back(r);
          ++in_flight_;
          ++accepted;
        }
      } catch (...) {
        if (accepted == 0) return -ENOMEM;
      }
    }
    work_cv_.notify_all();
    return accepted;
  }

  int reap(std::span<Completion> out, unsigned min, int timeout_ms) noexcept override {
    if (int rc = own_threads(); rc < 0) return rc;
    std::unique_lock lock(mu_);
    if (min > 0 && in_flight_ > 0)
      done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return !done_.empty(); });
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
      --in_flight_;
    }
    return static_cast<int>(n);
  }

  int register_buffers(std::span<const BufferRange>) noexcept override { return -EOPNOTSUPP; }
  uint32_t capacity() const noexcept override { return qd_; }
  uint32_t in_flight() const noexcept override {
    std::lock_guard lock(mu_);
    return in_flight_;
  }
  std::string_view name() const noexcept override { return "pread"; }

 private:
  void serve() noexcept {
    pthread_setname_np(pthread_self(), "ss-loader-pread");  // for per-thread CPU and traces
    std::unique_lock lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
      if (stopping_) return;
      const ReadRequest r = queued_.front();
      queued_.pop_front();
      lock.unlock();
      const Completion c{r.user_data, read_one(r)};
      lock.lock();
      try {
        done_.push_back(c);
      } catch (...) {
        --in_flight_;  // lost to memory exhaustion: the engine times it out
      }
      done_cv_.notify_one();
    }
  }

  int32_t read_one(const ReadRequest& r) noexcept {
    iovec iov{r.buf, r.length};
    const ssize_t n =
        sys_.preadv2(r.fd, &iov, 1, static_cast<off_t>(r.offset), r.nowait ? RWF_NOWAIT : 0);
    return n < 0 ? -errno : static_cast<int32_t>(n);
  }

  // A forked child has none of the parent's threads: start its own.
  int own_threads() noexcept {
    if (gen_ == detail::fork_generation()) return 0;
    // The parent's lock and waiter state means nothing here: its threads are
    // not in this process, and a notify would wait for them forever.
    new (&mu_) std::mutex();
    new (&work_cv_) std::condition_variable();
    new (&done_cv_) std::condition_variable();
    for (auto& t : threads_) t.detach();
    threads_.clear();
    queued_.clear();
    done_.clear();
    in_flight_ = 0;
    return start();
  }

  void stop_threads() noexcept {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

  Sys& sys_;
  uint32_t qd_;
  uint32_t threads_n_;
  uint64_t gen_ = 0;  // fork_generation() when set up: another is a forked child
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<ReadRequest> queued_;
  std::deque<Completion> done_;
  uint32_t in_flight_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<StorageReader> make_pread_reader(const ReaderOptions& o, Sys& sys,
                                                 int* err) noexcept {
  try {
    auto r = std::make_unique<PreadReader>(o, sys);
    const int rc = r->start();
    if (err) *err = rc;
    if (rc < 0) return nullptr;
    return r;
  } catch (...) {
    if (err) *err = -ENOMEM;
    return nullptr;
  }
}

}  // namespace stallscope::loader
