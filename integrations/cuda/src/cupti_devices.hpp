// Which GPU each CUDA device of this process is, for the trace's
// "cuda.device" attachments: identities from CUPTI's device records, and
// the device ordinals that ran work (kernel, memcpy, memset records). A
// device is attached once, as soon as it has both; one that ran work but
// never got a device record is attached by finish() with an empty uuid and
// name, so the analyzer still knows the ordinal. A device that ran no work
// is never attached.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cupti_convert.hpp"

namespace stallscope::cuda {

class DeviceLog {
 public:
  // Ordinals at or above this are not tracked (CUDA numbers devices from 0
  // up to the device count).
  static constexpr uint32_t kMaxDevices = 256;

  // What one CUPTI buffer showed, gathered by one thread without locks:
  // setting a bit per work record allocates nothing.
  struct Batch {
    uint64_t work[kMaxDevices / 64] = {};
    std::vector<DeviceIdentity> identities;  // device records: a few per process
    void add_work(int64_t device) noexcept;
    bool empty() const noexcept;
  };

  // Merges a batch; returns the attachments (JSON) now due, each device's
  // once. Thread-safe; takes no lock when the batch adds nothing new.
  // Throws std::bad_alloc.
  std::vector<std::string> merge(Batch& batch);
  // The attachments of devices that ran work without an identity (called
  // when no device record can arrive any more). Thread-safe, each device
  // once. Throws std::bad_alloc.
  std::vector<std::string> finish();

 private:
  static constexpr size_t kWords = kMaxDevices / 64;
  bool adds_nothing(const Batch& batch) const noexcept;

  std::mutex mu_;
  std::map<uint32_t, DeviceIdentity> known_;  // the first record per ordinal
  uint64_t work_[kWords] = {};
  uint64_t attached_[kWords] = {};
  // Work bits already merged: a buffer with no new device skips the lock.
  std::atomic<uint64_t> merged_[kWords] = {};
};

}  // namespace stallscope::cuda
