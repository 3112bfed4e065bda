// The trainer's compute device behind one narrow interface: the emulated
// device (emulated_device.hpp) everywhere, and a CUDA device where the
// build found the toolkit and the machine has a driver and a GPU. The step
// loop queues DeviceOps on in-order streams and waits on their sequence
// numbers; it never knows which device it drives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm.hpp"
#include "emulated_device.hpp"
#include "options.hpp"

namespace trainer {

class Device {
 public:
  virtual ~Device() = default;
  // Queues `op` on `stream`; returns its sequence number (1, 2, …).
  virtual uint64_t enqueue(int stream, DeviceOp op) = 0;
  // Blocks until `stream` completed `seq` (0 = everything queued so far).
  virtual void wait(int stream, uint64_t seq = 0) = 0;
  // The host bytes the next kCopyH2D op copies. The emulated device models
  // the copy's time only, so it ignores them.
  virtual void set_copy_source(const void* /*host*/, uint64_t /*bytes*/) {}
  virtual std::string kind() const = 0;  // "emulated" or "cuda"
  virtual std::string model_json() const = 0;
  // The emulated device underneath, or nullptr (the facts of the run
  // describe its model).
  virtual const EmulatedDevice* emulated() const { return nullptr; }
};

// The device --device asks for: 0 with *out set and *note saying which and
// why, or 2 with *note the error (--device cuda where CUDA is unusable).
int make_device(const Options& o, int streams, Comm* comm, std::unique_ptr<Device>* out,
                std::string* note);

// The CUDA device (cuda_device.cpp), or nullptr with *why saying why
// ("no CUDA driver: …", "built without CUDA", …).
std::unique_ptr<Device> make_cuda_device(const Options& o, int streams, Comm* comm,
                                         std::string* why);

}  // namespace trainer
