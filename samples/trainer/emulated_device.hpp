// The trainer's emulated compute device (DESIGN.md, "machines without a
// GPU"): in-order streams, each a thread that *holds* every queued kernel or
// collective for its modelled time — sleeping, so no host core is used, or
// spinning with burn = true — and records it as an emulated kernel or
// collective event. A collective first runs a real token all-reduce through
// Comm (so synchronisation and straggler waits are real), then holds
// 2(n-1)/n · bytes / bus bandwidth. A copy is held for its given time and
// recorded as an H2D copy on its stream (the trainer's --copy-in-step).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <stallscope/trace.hpp>

#include "comm.hpp"

namespace trainer {

struct DeviceOp {
  enum class Type : uint8_t { kKernel, kCollective, kCopyH2D };
  Type type = Type::kKernel;
  stallscope::NameId name = 0;
  double ms = 0;            // kernel: modelled duration
  uint64_t bytes = 0;       // collective or copy: payload
  bool pinned = true;       // copy: source memory kind (recorded only)
  int wait_stream = -1;     // start only after that stream reached wait_seq
  uint64_t wait_seq = 0;
};

struct DeviceModel {
  double bus_gbps = 10.0;   // collective bus bandwidth, GB/s
  bool burn = false;        // spin instead of sleeping
};

class EmulatedDevice {
 public:
  EmulatedDevice(int streams, DeviceModel m, Comm* comm);
  ~EmulatedDevice();
  EmulatedDevice(const EmulatedDevice&) = delete;
  EmulatedDevice& operator=(const EmulatedDevice&) = delete;

  // Queues `op` on `stream`; returns its sequence number (1, 2, …).
  uint64_t enqueue(int stream, DeviceOp op);
  // Blocks until `stream` completed `seq` (0 = everything queued so far).
  void wait(int stream, uint64_t seq = 0);
  uint64_t queued(int stream) const;
  // Modelled collective transfer time, ms.
  double collective_ms(uint64_t bytes) const;
  std::string model_json() const;

 private:
  struct Stream;
  void run(int index);
  void execute(int index, const DeviceOp& op);
  void hold_for(double ms) const;

  DeviceModel model_;
  Comm* comm_;
  std::vector<std::unique_ptr<Stream>> streams_;
  uint64_t collective_seq_ = 0;
};

}  // namespace trainer
