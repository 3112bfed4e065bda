// A bounded pool of CUPTI activity buffers. When every buffer is in
// CUPTI's hands the request gets none and CUPTI drops records, which it
// counts (cuptiActivityGetNumDroppedRecords): memory stays bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace stallscope::cuda {

class CuptiBuffers {
 public:
  static constexpr size_t kBufferBytes = 4u << 20;
  static constexpr size_t kMaxBuffers = 16;  // at most 64 MiB in flight
  static constexpr size_t kAlign = 8;

  // A free buffer, or nullptr when all kMaxBuffers are taken.
  uint8_t* take() noexcept {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      uint8_t* b = free_.back();
      free_.pop_back();
      return b;
    }
    if (allocated_ == kMaxBuffers) return nullptr;
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
    if (b != nullptr) ++allocated_;
    return b;
  }
  void give_back(uint8_t* b) noexcept {
    if (b == nullptr) return;
    std::lock_guard lock(mu_);
    free_.push_back(b);  // capacity reserved: never allocates
  }
  CuptiBuffers() { free_.reserve(kMaxBuffers); }

 private:
  std::mutex mu_;
  std::vector<uint8_t*> free_;
  size_t allocated_ = 0;
};

}  // namespace stallscope::cuda
