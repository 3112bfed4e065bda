// make_cuda_device() where the CUDA toolkit was not found at build time.
#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

std::unique_ptr<Device> make_cuda_device(std::string* why) noexcept {
  if (why) *why = "no CUDA driver: stallscope was built without the CUDA toolkit";
  return nullptr;
}

}  // namespace stallscope::loader
