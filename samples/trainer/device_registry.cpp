// The devices side by side: --device cuda|emulated|auto picks one; auto
// takes CUDA where it is usable and says in one line why it did not.
#include "device.hpp"

namespace trainer {

namespace {

class EmulatedBackend final : public Device {
 public:
  EmulatedBackend(int streams, DeviceModel m, Comm* comm) : dev_(streams, m, comm) {}
  uint64_t enqueue(int stream, DeviceOp op) override { return dev_.enqueue(stream, op); }
  void wait(int stream, uint64_t seq) override { dev_.wait(stream, seq); }
  std::string kind() const override { return "emulated"; }
  std::string model_json() const override { return dev_.model_json(); }
  const EmulatedDevice* emulated() const override { return &dev_; }

 private:
  EmulatedDevice dev_;
};

std::unique_ptr<Device> emulated(const Options& o, int streams, Comm* comm) {
  return std::make_unique<EmulatedBackend>(
      streams, DeviceModel{.bus_gbps = o.bus_gbps, .burn = o.device_burn}, comm);
}

}  // namespace

int make_device(const Options& o, int streams, Comm* comm, std::unique_ptr<Device>* out,
                std::string* note) {
  if (o.device == "emulated") {
    *out = emulated(o, streams, comm);
    *note = "emulated device, as --device emulated asks";
    return 0;
  }
  std::string why;
  if (auto d = make_cuda_device(o, streams, comm, &why)) {
    *out = std::move(d);
    *note = "CUDA device (" + why + ")";
    return 0;
  }
  if (o.device == "cuda") return *note = why + " (--device cuda)", 2;
  *out = emulated(o, streams, comm);
  *note = "--device auto: " + why + "; using the emulated device";
  return 0;
}

}  // namespace trainer
