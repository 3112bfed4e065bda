// The io_uring backend: one ring per reader, created by the process that
// uses it (a forked child builds its own: the parent's ring memory is shared
// with the child, and completions would land in the wrong process).
#include <errno.h>
#include <liburing.h>
#include <unistd.h>

#include <vector>

#include "fork_generation.hpp"
#include "log.hpp"
#include "stallscope/loader/storage.hpp"

namespace stallscope::loader {

namespace {

constexpr int kSubmitRetries = 16;

class UringReader final : public StorageReader {
 public:
  UringReader(const ReaderOptions& o, Sys& sys) : sys_(sys), qd_(o.queue_depth) {}
  ~UringReader() override {
    if (ready_ && gen_ == detail::fork_generation()) sys_.uring_exit(&ring_);
  }

  int init() noexcept {
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = 2 * qd_;  // never more than qd_ in flight: the CQ cannot overflow
    const int rc = STALLSCOPE_URING_CHECK(sys_.uring_init(qd_, &ring_, &p));
    if (rc < 0) return rc;
    ready_ = true;
    gen_ = detail::fork_generation();
    in_flight_ = 0;
    unsubmitted_ = 0;
    return 0;
  }

  int submit(std::span<const ReadRequest> reqs) noexcept override {
    if (int rc = own_ring(); rc < 0) return rc;
    int accepted = 0;
    for (const ReadRequest& r : reqs) {
      if (in_flight_ >= qd_) break;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      prepare(sqe, r);
      ++in_flight_;
      ++unsubmitted_;
      ++accepted;
    }
    const int rc = flush();
    return rc < 0 && accepted == 0 ? rc : accepted;
  }

  int reap(std::span<Completion> out, unsigned min, int timeout_ms) noexcept override {
    if (int rc = own_ring(); rc < 0) return rc;
    if (unsubmitted_ > 0) flush();
    size_t n = take(out);
    if (n == 0 && min > 0 && in_flight_ > 0) {
      __kernel_timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000ll};
      io_uring_cqe* cqe = nullptr;
      const int rc = sys_.uring_wait(&ring_, &cqe, &ts);
      if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN)
        return STALLSCOPE_URING_CHECK(rc);
      n = take(out);
    }
    return static_cast<int>(n);
  }

  int register_buffers(std::span<const BufferRange> ranges) noexcept override {
    if (int rc = own_ring(); rc < 0) return rc;
    try {
      std::vector<iovec> iov;
      for (const auto& r : ranges) iov.push_back({r.base, static_cast<size_t>(r.bytes)});
      const int rc = sys_.uring_register_buffers(&ring_, iov.data(),
                                                 static_cast<unsigned>(iov.size()));
      if (rc < 0) return rc;  // ENOMEM/EPERM (memlock): reads stay unregistered
      fixed_.assign(ranges.begin(), ranges.end());
    } catch (...) {
      return -ENOMEM;
    }
    return 0;
  }

  uint32_t capacity() const noexcept override { return qd_; }
  uint32_t in_flight() const noexcept override { return in_flight_; }
  std::string_view name() const noexcept override { return "uring"; }
  uint64_t fixed_reads() const noexcept override { return fixed_reads_; }

 private:
  // A forked child gets a ring of its own; the parent's requests are not its own.
  int own_ring() noexcept {
    if (gen_ == detail::fork_generation()) return 0;
    sys_.uring_exit(&ring_);  // unmaps the child's view only
    ready_ = false;
    const std::vector<BufferRange> keep = fixed_;
    fixed_.clear();
    if (int rc = init(); rc < 0) return rc;
    if (!keep.empty()) register_buffers(keep);
    return 0;
  }

  void prepare(io_uring_sqe* sqe, const ReadRequest& r) noexcept {
    const int idx = fixed_index(r);
    if (idx >= 0) {
      io_uring_prep_read_fixed(sqe, r.fd, r.buf, r.length, r.offset, idx);
      ++fixed_reads_;
    } else {
      io_uring_prep_read(sqe, r.fd, r.buf, r.length, r.offset);
    }
    if (r.nowait) sqe->rw_flags = RWF_NOWAIT;
    io_uring_sqe_set_data64(sqe, r.user_data);
  }

  int fixed_index(const ReadRequest& r) const noexcept {
    const auto* b = static_cast<const char*>(r.buf);
    for (size_t i = 0; i < fixed_.size(); ++i) {
      const auto* base = static_cast<const char*>(fixed_[i].base);
      if (b >= base && b + r.length <= base + fixed_[i].bytes) return static_cast<int>(i);
    }
    return -1;
  }

  // Pushes queued SQEs to the kernel. -EBUSY/-EAGAIN (completions must be
  // reaped first) leave them queued for the next reap().
  int flush() noexcept {
    for (int i = 0; i < kSubmitRetries && unsubmitted_ > 0; ++i) {
      const int rc = sys_.uring_submit(&ring_);
      if (rc >= 0) {
        unsubmitted_ -= std::min<uint32_t>(unsubmitted_, static_cast<uint32_t>(rc));
        if (rc == 0) unsubmitted_ = 0;  // liburing's wait may have submitted them
        continue;
      }
      if (rc == -EINTR) continue;
      if (rc == -EBUSY || rc == -EAGAIN) return 0;
      return STALLSCOPE_URING_CHECK(rc);
    }
    return 0;
  }

  size_t take(std::span<Completion> out) noexcept {
    size_t n = 0;
    io_uring_cqe* cqe = nullptr;
    while (n < out.size() && io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe != nullptr) {
      Completion c{io_uring_cqe_get_data64(cqe), cqe->res};
      sys_.uring_filter(c.res, c.user_data);
      io_uring_cqe_seen(&ring_, cqe);
      if (in_flight_ > 0) --in_flight_;
      out[n++] = c;
    }
    return n;
  }

  Sys& sys_;
  io_uring ring_{};
  uint32_t qd_;
  uint32_t in_flight_ = 0;
  uint32_t unsubmitted_ = 0;
  uint64_t fixed_reads_ = 0;
  uint64_t gen_ = 0;  // fork_generation() when set up: another is a forked child
  bool ready_ = false;
  std::vector<BufferRange> fixed_;
};

}  // namespace

std::unique_ptr<StorageReader> make_uring_reader(const ReaderOptions& o, Sys& sys,
                                                 int* err) noexcept {
  try {
    auto r = std::make_unique<UringReader>(o, sys);
    const int rc = r->init();
    if (err) *err = rc;
    if (rc < 0) return nullptr;
    return r;
  } catch (...) {
    if (err) *err = -ENOMEM;
    return nullptr;
  }
}

}  // namespace stallscope::loader
