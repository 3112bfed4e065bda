// The CUDA device: staging in cudaHostAlloc memory (or pageable memory when
// pinned is off), copies on one non-blocking copy stream, an event pair per
// copy. Built where the CUDA toolkit is; without a driver or a device,
// make_cuda_device() says why and the registry falls back to the emulated
// device.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include <stallscope/trace.hpp>

#include "log.hpp"
#include "stallscope/loader/device.hpp"

// Logs a failed CUDA runtime call with its text and file:line; yields the error.
#define STALLSCOPE_CUDA_CHECK(call)                                                      \
  ([&]() noexcept {                                                                      \
    const cudaError_t stallscope_e_ = (call);                                            \
    if (stallscope_e_ != cudaSuccess)                                                    \
      ::stallscope::loader::detail::note("CUDA call `%s` failed: %s at %s:%d", #call,    \
                                         cudaGetErrorString(stallscope_e_), __FILE__,    \
                                         __LINE__);                                      \
    return stallscope_e_;                                                                \
  }())

namespace stallscope::loader {

namespace {

class CudaDevice final : public Device {
 public:
  int init() noexcept {
    if (STALLSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)))
      return -ENODEV;
    return 0;
  }
  ~CudaDevice() override {
    for (auto& [seq, ev] : events_) release(ev);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  HostBuffer alloc_host(uint64_t bytes, bool pinned) noexcept override {
    HostBuffer b;
    b.bytes = bytes;
    if (pinned && cudaHostAlloc(&b.data, bytes, cudaHostAllocDefault) == cudaSuccess) {
      b.pinned = true;
    } else {
      bool locked = false;
      b.data = alloc_locked(bytes, false, &locked);
      b.locked_refused = pinned;
      if (pinned) ++stats_.lock_refused;
    }
    if (STALLSCOPE_CUDA_CHECK(cudaMalloc(&b.device, bytes)) != cudaSuccess) b.device = nullptr;
    return b;
  }

  void free_host(HostBuffer& b) noexcept override {
    if (b.device) cudaFree(b.device);
    if (b.pinned) cudaFreeHost(b.data);
    else free_locked(b.data, b.bytes, false);
    b = HostBuffer{};
  }

  CopyTicket copy_h2d(const HostBuffer& b, uint64_t bytes, uint64_t batch_id) noexcept override {
    if (b.device == nullptr) return CopyTicket{};
    Events ev{};
    if (cudaEventCreate(&ev.start) != cudaSuccess || cudaEventCreate(&ev.end) != cudaSuccess)
      return CopyTicket{};
    ev.host_start = ticks_now();
    ev.bytes = bytes;
    ev.batch = batch_id;
    ev.pinned = b.pinned;
    cudaEventRecord(ev.start, stream_);
    STALLSCOPE_CUDA_CHECK(cudaMemcpyAsync(b.device, b.data, bytes, cudaMemcpyHostToDevice, stream_));
    cudaEventRecord(ev.end, stream_);
    std::lock_guard lock(mu_);
    events_[++issued_] = ev;
    return CopyTicket{issued_};
  }

  int wait(CopyTicket t) noexcept override {
    Events ev;
    {
      std::lock_guard lock(mu_);
      auto it = events_.find(t.seq);
      if (it == events_.end()) return 0;
      ev = it->second;
      events_.erase(it);
    }
    const cudaError_t e = STALLSCOPE_CUDA_CHECK(cudaEventSynchronize(ev.end));
    trace(ev);
    release(ev);
    return e == cudaSuccess ? 0 : -EIO;
  }

  bool done(CopyTicket t) noexcept override {
    std::lock_guard lock(mu_);
    auto it = events_.find(t.seq);
    return it == events_.end() || cudaEventQuery(it->second.end) == cudaSuccess;
  }

  std::string_view name() const noexcept override { return "cuda"; }
  bool emulated() const noexcept override { return false; }
  DeviceStats stats() const noexcept override { return stats_; }
  std::string model_json() const override { return "{\"kind\":\"cuda\"}"; }

 private:
  struct Events {
    cudaEvent_t start = nullptr, end = nullptr;
    Ticks host_start = 0;
    uint64_t bytes = 0, batch = 0;
    bool pinned = false;
  };

  static void release(Events& ev) noexcept {
    if (ev.start) cudaEventDestroy(ev.start);
    if (ev.end) cudaEventDestroy(ev.end);
  }

  void trace(const Events& ev) noexcept {
    if (!enabled()) return;
    Copy c;
    c.kind = Kind::kH2D;
    c.bytes = ev.bytes;
    c.src = ev.pinned ? format::MemKind::kPinned : format::MemKind::kPageable;
    c.dst = format::MemKind::kDevice;
    c.corr = ev.batch;
    record_copy(ev.host_start, ticks_now(), c);  // CUPTI records the exact device times
  }

  cudaStream_t stream_ = nullptr;
  std::mutex mu_;
  std::map<uint64_t, Events> events_;
  uint64_t issued_ = 0;
  DeviceStats stats_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(std::string* why) noexcept {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why)
      *why = std::string(e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                             ? "no CUDA driver: "
                             : "CUDA unusable: ") +
             (e == cudaSuccess ? "no device" : cudaGetErrorString(e));
    return nullptr;
  }
  try {
    auto d = std::make_unique<CudaDevice>();
    if (d->init() != 0) {
      if (why) *why = "CUDA unusable: cannot create a copy stream";
      return nullptr;
    }
    return d;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace stallscope::loader
