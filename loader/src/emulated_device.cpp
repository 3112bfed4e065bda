// The emulated device (DESIGN.md): a device thread holds each copy for its
// modelled duration, sleeping, so it uses no host core. A pageable copy
// first does the real memcpy into staging on the calling thread, as the
// CUDA driver does with its bounce buffers; a pinned copy only waits.
#include <errno.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <stallscope/trace.hpp>

#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

namespace {

constexpr uint64_t kBounceBytes = 4u << 20;

class EmulatedDevice final : public Device {
 public:
  explicit EmulatedDevice(const DeviceModel& m) : model_(m) {
    bounce_ = alloc_locked(kBounceBytes, true, &bounce_locked_);
    thread_ = std::thread([this] { run(); });
  }
  ~EmulatedDevice() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    free_locked(bounce_, kBounceBytes, bounce_locked_);
  }

  HostBuffer alloc_host(uint64_t bytes, bool pinned) noexcept override {
    HostBuffer b;
    bool locked = false;
    b.data = alloc_locked(bytes, pinned, &locked);
    b.bytes = bytes;
    b.pinned = locked;
    b.locked_refused = pinned && !locked;
    if (b.locked_refused) {
      std::lock_guard lock(mu_);
      ++stats_.lock_refused;
    }
    return b;
  }

  void free_host(HostBuffer& b) noexcept override {
    free_locked(b.data, b.bytes, b.pinned);
    b = HostBuffer{};
  }

  CopyTicket copy_h2d(const HostBuffer& b, uint64_t bytes, uint64_t batch_id) noexcept override {
    if (!b.pinned) stage_pageable(b, bytes);
    const double gbps = b.pinned ? model_.pinned_gbps : model_.pageable_gbps;
    std::lock_guard lock(mu_);
    try {
      jobs_.push_back({++issued_, bytes, static_cast<uint64_t>(bytes / gbps), batch_id, b.pinned});
    } catch (...) {
      return CopyTicket{};  // not issued: wait() returns at once
    }
    cv_.notify_all();
    return CopyTicket{issued_};
  }

  int wait(CopyTicket t) noexcept override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return completed_ >= t.seq || stop_; });
    return completed_ >= t.seq ? 0 : -ECANCELED;
  }

  bool done(CopyTicket t) noexcept override {
    std::lock_guard lock(mu_);
    return completed_ >= t.seq;
  }

  std::string_view name() const noexcept override { return "emulated"; }
  bool emulated() const noexcept override { return true; }
  DeviceStats stats() const noexcept override {
    std::lock_guard lock(mu_);
    return stats_;
  }
  std::string model_json() const override {
    return "{\"kind\":\"emulated\",\"h2d_pinned_gbps\":" + std::to_string(model_.pinned_gbps) +
           ",\"h2d_pageable_gbps\":" + std::to_string(model_.pageable_gbps) +
           ",\"pageable_copy\":\"memcpy into staging, then bytes/pageable bandwidth\"" +
           ",\"pinned_copy\":\"bytes/pinned bandwidth\",\"uses_host_core\":false}";
  }

 private:
  struct Job {
    uint64_t seq, bytes, ns, batch;
    bool pinned;
  };

  void stage_pageable(const HostBuffer& b, uint64_t bytes) noexcept {
    if (bounce_ == nullptr) return;
    for (uint64_t off = 0; off < bytes; off += kBounceBytes)
      std::memcpy(bounce_, static_cast<const char*>(b.data) + off,
                  std::min(kBounceBytes, bytes - off));
  }

  void run() noexcept {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping with nothing left
      const Job j = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      hold(j);
      lock.lock();
      completed_ = j.seq;
      ++stats_.copies;
      stats_.bytes += j.bytes;
      cv_.notify_all();
    }
  }

  void hold(const Job& j) noexcept {
    const Ticks start = ticks_now();
    std::this_thread::sleep_for(std::chrono::nanoseconds(j.ns));
    if (!enabled()) return;
    Copy c;
    c.kind = Kind::kH2D;
    c.bytes = j.bytes;
    c.src = j.pinned ? format::MemKind::kPinned : format::MemKind::kPageable;
    c.dst = format::MemKind::kDevice;
    c.corr = j.batch;
    c.emulated = true;
    record_copy(start, ticks_now(), c);
  }

  DeviceModel model_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  uint64_t issued_ = 0, completed_ = 0;
  bool stop_ = false;
  DeviceStats stats_;
  void* bounce_ = nullptr;
  bool bounce_locked_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Device> make_emulated_device(const DeviceModel& m) noexcept {
  try {
    return std::make_unique<EmulatedDevice>(m);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace stallscope::loader
