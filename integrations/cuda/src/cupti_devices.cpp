// Device identities and the devices that ran work (see cupti_devices.hpp).
#include "cupti_devices.hpp"

namespace stallscope::cuda {
namespace {

bool has(const uint64_t* words, uint32_t id) noexcept { return (words[id / 64] >> (id % 64)) & 1u; }
void set(uint64_t* words, uint32_t id) noexcept { words[id / 64] |= uint64_t{1} << (id % 64); }

}  // namespace

void DeviceLog::Batch::add_work(int64_t device) noexcept {
  if (device >= 0 && device < kMaxDevices) set(work, static_cast<uint32_t>(device));
}

bool DeviceLog::Batch::empty() const noexcept {
  for (uint64_t w : work)
    if (w != 0) return false;
  return identities.empty();
}

bool DeviceLog::adds_nothing(const Batch& batch) const noexcept {
  if (!batch.identities.empty()) return false;
  for (size_t i = 0; i < kWords; ++i)
    if ((batch.work[i] & ~merged_[i].load(std::memory_order_acquire)) != 0) return false;
  return true;
}

std::vector<std::string> DeviceLog::merge(Batch& batch) {
  std::vector<std::string> due;
  if (adds_nothing(batch)) return due;
  std::lock_guard lock(mu_);
  for (auto& d : batch.identities)
    if (d.id < kMaxDevices) known_.emplace(d.id, std::move(d));
  for (size_t i = 0; i < kWords; ++i) {
    work_[i] |= batch.work[i];
    merged_[i].store(work_[i], std::memory_order_release);
  }
  for (const auto& [id, identity] : known_) {
    if (!has(work_, id) || has(attached_, id)) continue;
    due.push_back(device_json(identity));
    set(attached_, id);
  }
  return due;
}

std::vector<std::string> DeviceLog::finish() {
  std::vector<std::string> due;
  std::lock_guard lock(mu_);
  for (uint32_t id = 0; id < kMaxDevices; ++id) {
    if (!has(work_, id) || has(attached_, id)) continue;
    due.push_back(unknown_device_json(id));
    set(attached_, id);
  }
  return due;
}

}  // namespace stallscope::cuda
