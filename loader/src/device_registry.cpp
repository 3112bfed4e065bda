// The devices, side by side: CUDA where usable, else the emulated device.
#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

std::unique_ptr<Device> make_device(DeviceKind kind, const DeviceModel& m,
                                    std::string* why) noexcept {
  if (kind == DeviceKind::kNone) {
    if (why) *why = "no device: batches stay in host memory";
    return nullptr;
  }
  if (kind == DeviceKind::kEmulated) {
    if (why) *why = "emulated device, as configured";
    return make_emulated_device(m);
  }
  std::string cuda_why;
  if (auto d = make_cuda_device(&cuda_why)) {
    if (why) *why = "CUDA device";
    return d;
  }
  if (why) *why = cuda_why + "; using the emulated device";
  return make_emulated_device(m);
}

}  // namespace stallscope::loader
