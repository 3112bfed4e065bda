// The trainer's CUDA device: forward, backward and update are spin kernels
// (PTX JIT-compiled by the driver, so no nvcc is needed) held for their
// modelled time by the SM clock, calibrated once against CUDA events; the
// --copy-in-step H2D copies the real batch, from pinned staging or straight
// from pageable memory as --loader-pinned says. Each stream has a completion
// thread that waits for its ops' end events in order and records them from
// event-pair times, so wait(stream, seq) and the trace behave as on the
// emulated device. A collective on several ranks is a real NCCL all-reduce
// of the gradient bytes (nccl_allreduce.hpp); where NCCL cannot be used it
// runs the Comm token all-reduce in stream order (a host function) and
// holds the modelled transfer time on the device, and says so. On one rank
// there is nothing to exchange.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <stallscope/clock.hpp>
#include <stallscope/trace.hpp>

#include "device.hpp"
#include "ptx_spin.hpp"
#include "nccl_allreduce.hpp"

namespace trainer {

namespace {

std::string cuda_text(cudaError_t e) { return cudaGetErrorString(e); }

struct Pending {
  uint64_t seq = 0;
  DeviceOp op;
  cudaEvent_t start = nullptr, end = nullptr;
};

struct CudaStream {
  cudaStream_t stream = nullptr;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::deque<Pending> pending;
  uint64_t queued = 0, completed = 0;
  bool stop = false;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(const Options& o, Comm* comm)
      : bus_gbps_(o.bus_gbps), pinned_(o.loader.pinned), comm_(comm) {}
  ~CudaDevice() override {
    for (auto& s : streams_) {
      std::lock_guard lock(s->mu);
      s->stop = true;
      s->cv.notify_all();
    }
    for (auto& s : streams_)
      if (s->thread.joinable()) s->thread.join();
    for (auto& s : streams_)
      if (s->stream) cudaStreamDestroy(s->stream);
    for (void* p : staging_) cudaFreeHost(p);
    if (dev_buf_) cudaFree(dev_buf_);
    nccl_.reset();
    if (grad_buf_) cudaFree(grad_buf_);
  }

  // "" when ready, else why not.
  std::string init(int streams) {
    if (spin_ = stallscope::test::load_spin_kernel(); spin_ == nullptr)
      return "CUDA unusable: the driver refused the PTX spin kernel";
    for (int i = 0; i < streams; ++i) {
      auto s = std::make_unique<CudaStream>();
      if (const cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking); e)
        return "CUDA unusable: cudaStreamCreate: " + cuda_text(e);
      streams_.push_back(std::move(s));
    }
    if (std::string why = calibrate(); !why.empty()) return why;
    // Under `stallscope run` the shim injected CUPTI (libstallscope_cuda.so),
    // which records these kernels and copies itself: recording them here too
    // would count the device time twice.
    cupti_records_ = dlopen("libstallscope_cuda.so", RTLD_NOW | RTLD_NOLOAD) != nullptr;
    if (ranks() > 1) open_nccl();
    for (int i = 0; i < streams; ++i) streams_[i]->thread = std::thread([this, i] { complete(i); });
    return "";
  }

  uint64_t enqueue(int stream, DeviceOp op) override {
    CudaStream& s = *streams_.at(stream);
    if (op.wait_stream >= 0) wait_on(s.stream, op.wait_stream, op.wait_seq);
    Pending p{.op = op};
    cudaEventCreateWithFlags(&p.start, cudaEventBlockingSync);
    cudaEventCreateWithFlags(&p.end, cudaEventBlockingSync);
    cudaEventRecord(p.start, s.stream);
    launch(s.stream, op);
    cudaEventRecord(p.end, s.stream);
    std::lock_guard lock(s.mu);
    p.seq = ++s.queued;
    s.pending.push_back(p);
    s.cv.notify_one();
    return p.seq;
  }

  void wait(int stream, uint64_t seq) override {
    CudaStream& s = *streams_.at(stream);
    std::unique_lock lock(s.mu);
    if (seq == 0) seq = s.queued;
    s.done_cv.wait(lock, [&] { return s.completed >= seq; });
  }

  void set_copy_source(const void* host, uint64_t bytes) override {
    copy_src_ = host;
    copy_bytes_ = bytes;
  }

  std::string kind() const override { return "cuda"; }

  std::string model_json() const override {
    std::ostringstream o;
    o << "{\"kind\":\"cuda\",\"device\":\"" << device_name_ << "\",\"streams\":" << streams_.size()
      << ",\"spin_clock_khz\":" << khz_ << ",\"recorded_by\":\""
      << (cupti_records_ ? "cupti" : "events") << "\""
      << ",\"ranks\":" << ranks()
      << ",\"collective\":\""
      << (nccl_ ? "NCCL all-reduce of the gradient bytes"
                : "token all-reduce through Comm, then 2(n-1)/n*bytes/bus_gbps on the device")
      << "\",\"bus_gbps\":" << bus_gbps_ << "}";
    return o.str();
  }

 private:
  int ranks() const { return comm_ ? comm_->size() : 1; }

  void open_nccl() {
    std::string why;
    nccl_ = open_nccl_allreduce(*comm_, &why);
    if (nccl_)
      std::fprintf(stderr, "trainer: gradient all-reduce through NCCL %s\n", nccl_->version().c_str());
    else
      std::fprintf(stderr, "trainer: %s: all-reduce is a token exchange plus the modelled transfer\n",
                   why.c_str());
  }

  // The gradient buffer, grown to `bytes` (all ranks grow it alike).
  bool grad_buffer(uint64_t bytes) {
    if (bytes <= grad_bytes_) return true;
    if (grad_buf_) cudaFree(grad_buf_);
    grad_buf_ = nullptr;
    grad_bytes_ = cudaMalloc(&grad_buf_, bytes) == cudaSuccess ? bytes : 0;
    return grad_bytes_ != 0;
  }

  // Runs a spin of 20 ms at the reported clock and measures it with events:
  // the ratio corrects a clock the driver reports wrong (or not at all).
  std::string calibrate() {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) device_name_ = prop.name;
    khz_ = stallscope::test::sm_clock_khz(0);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaStream_t s = streams_[0]->stream;
    stallscope::test::launch_spin(spin_, 1'000'000, khz_, s);  // JIT and warm-up
    cudaEventRecord(a, s);
    const cudaError_t e = stallscope::test::launch_spin(spin_, 20'000'000, khz_, s);
    cudaEventRecord(b, s);
    float ms = 0;
    const cudaError_t se = cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (e != cudaSuccess || se != cudaSuccess)
      return "CUDA unusable: spin kernel launch: " + cuda_text(e ? e : se);
    if (ms > 0.5f) khz_ = static_cast<int>(khz_ * 20.0 / ms);
    return "";
  }

  void spin(cudaStream_t s, double ms) {
    if (ms > 0) stallscope::test::launch_spin(spin_, static_cast<uint64_t>(ms * 1e6), khz_, s);
  }

  // The other stream's op `seq`, if not yet complete, gates this stream.
  void wait_on(cudaStream_t s, int other, uint64_t seq) {
    CudaStream& o = *streams_.at(other);
    std::lock_guard lock(o.mu);
    if (o.completed >= seq) return;
    for (const Pending& p : o.pending)
      if (p.seq == seq) cudaStreamWaitEvent(s, p.end, 0);
  }

  static void CUDART_CB token_allreduce(void* self) {
    Comm* c = static_cast<CudaDevice*>(self)->comm_;
    c->start_token_allreduce();
    while (!c->done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

  void launch(cudaStream_t s, const DeviceOp& op) {
    switch (op.type) {
      case DeviceOp::Type::kKernel:
        return spin(s, op.ms);
      case DeviceOp::Type::kCopyH2D:
        return copy(s, op);
      case DeviceOp::Type::kCollective:
        if (nccl_ && grad_buffer(op.bytes)) {
          nccl_->enqueue(grad_buf_, op.bytes / sizeof(float), s);
        } else if (ranks() > 1) {
          cudaLaunchHostFunc(s, token_allreduce, this);
          spin(s, 2.0 * (ranks() - 1) / ranks() * static_cast<double>(op.bytes) /
                      (bus_gbps_ * 1e9) * 1e3);
        }
        return;
    }
  }

  // The batch to the device: pinned staging (two buffers, as two steps may
  // be in flight) or the pageable loader memory itself.
  void copy(cudaStream_t s, const DeviceOp& op) {
    const uint64_t bytes = copy_src_ ? copy_bytes_ : 0;
    if (bytes == 0) return;
    if (bytes > dev_bytes_) {
      cudaStreamSynchronize(s);
      if (dev_buf_) cudaFree(dev_buf_);
      for (void* p : staging_) cudaFreeHost(p);
      staging_.clear();
      dev_buf_ = nullptr;
      dev_bytes_ = cudaMalloc(&dev_buf_, bytes) == cudaSuccess ? bytes : 0;
      for (int i = 0; pinned_ && dev_bytes_ && i < 2; ++i) {
        void* p = nullptr;
        if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess) staging_.push_back(p);
      }
    }
    if (dev_bytes_ == 0) return;
    const void* src = copy_src_;
    if (op.pinned && staging_.size() == 2) {
      void* stage = staging_[flip_++ % 2];
      std::memcpy(stage, copy_src_, bytes);
      src = stage;
    }
    cudaMemcpyAsync(dev_buf_, src, bytes, cudaMemcpyHostToDevice, s);
  }

  void complete(int index) {
    CudaStream& s = *streams_[index];
    stallscope_thread_name_set(index == 0 ? "cuda compute stream" : "cuda comm stream");
    for (;;) {
      Pending p;
      {
        std::unique_lock lock(s.mu);
        s.cv.wait(lock, [&] { return s.stop || !s.pending.empty(); });
        if (s.pending.empty()) return;
        p = s.pending.front();
      }
      cudaEventSynchronize(p.end);
      record(index, p);
      std::lock_guard lock(s.mu);
      cudaEventDestroy(p.start);
      cudaEventDestroy(p.end);
      s.pending.pop_front();
      ++s.completed;
      s.done_cv.notify_all();
    }
  }

  void record(int index, const Pending& p) {
    float ms = 0;
    cudaEventElapsedTime(&ms, p.start, p.end);
    const stallscope::Ticks end = stallscope::ticks_now();
    const auto span = static_cast<stallscope::Ticks>(ms * 1e6 / stallscope::ns_per_tick());
    const stallscope::Ticks start = end > span ? end - span : 0;
    const auto stream = static_cast<uint32_t>(index);
    namespace f = stallscope::format;
    // CUPTI records kernels, copies and NCCL's kernels (as collectives).
    if (cupti_records_ && (p.op.type != DeviceOp::Type::kCollective || nccl_)) return;
    if (p.op.type == DeviceOp::Type::kKernel) {
      stallscope::record_kernel(start, end, {.name = p.op.name, .stream = stream});
    } else if (p.op.type == DeviceOp::Type::kCopyH2D) {
      stallscope::record_copy(start, end,
                              {.kind = stallscope::Kind::kH2D,
                               .bytes = p.op.bytes,
                               .src = p.op.pinned ? f::MemKind::kPinned : f::MemKind::kPageable,
                               .dst = f::MemKind::kDevice,
                               .stream = stream});
    } else {
      // Emulated unless NCCL moved the bytes.
      stallscope::record_collective(start, end,
                                    {.name = p.op.name,
                                     .op = f::CollOp::kAllReduce,
                                     .bytes = p.op.bytes,
                                     .comm_id = 1,
                                     .seq = ++collective_seq_,
                                     .rank = static_cast<uint32_t>(comm_ ? comm_->rank() : 0),
                                     .nranks = static_cast<uint32_t>(ranks()),
                                     .emulated = nccl_ == nullptr});
    }
  }

  double bus_gbps_;
  bool pinned_;
  Comm* comm_;
  cudaKernel_t spin_ = nullptr;
  int khz_ = 0;
  bool cupti_records_ = false;
  std::string device_name_ = "?";
  std::vector<std::unique_ptr<CudaStream>> streams_;
  const void* copy_src_ = nullptr;
  uint64_t copy_bytes_ = 0;
  void* dev_buf_ = nullptr;
  uint64_t dev_bytes_ = 0;
  std::vector<void*> staging_;
  uint64_t flip_ = 0, collective_seq_ = 0;
  std::unique_ptr<NcclAllreduce> nccl_;
  void* grad_buf_ = nullptr;
  uint64_t grad_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(const Options& o, int streams, Comm* comm,
                                         std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    const bool no_driver = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || count == 0;
    *why = std::string(no_driver ? "no CUDA driver: " : "CUDA unusable: ") +
           (e == cudaSuccess ? "no device" : cuda_text(e));
    return nullptr;
  }
  if (comm && comm->size() > 1) cudaSetDevice(comm->rank() % count);
  auto d = std::make_unique<CudaDevice>(o, comm);
  if (std::string w = d->init(streams); !w.empty()) return *why = w, nullptr;
  *why = std::to_string(count) + " GPU(s)";
  return d;
}

}  // namespace trainer
