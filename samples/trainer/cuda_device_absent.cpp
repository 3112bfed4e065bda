// A build without the CUDA toolkit: the registry falls back to the emulated
// device (auto) or refuses --device cuda with this reason.
#include "device.hpp"

namespace trainer {

std::unique_ptr<Device> make_cuda_device(const Options&, int, Comm*, std::string* why) {
  *why = "no CUDA driver: this trainer was built without the CUDA toolkit";
  return nullptr;
}

}  // namespace trainer
