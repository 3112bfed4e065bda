// A source of GPU activity, and the registry attach() starts them from.
// Backends sit side by side behind this narrow interface (CUPTI today).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace stallscope::cuda {

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual std::string_view name() const noexcept = 0;
  // Starts recording: 0 or -errno, having said why on stderr.
  virtual int attach() noexcept = 0;
  virtual int flush() noexcept = 0;
  virtual void set_capture(bool on) noexcept = 0;
  // Another library asks for the process-wide facility this source holds:
  // true = let it have it (after stepping aside), false = refuse.
  virtual bool hand_over(std::string_view api, std::string_view who) noexcept = 0;
  // A step marker on the calling thread (stallscope_step_hook_add): after
  // the step's begin record, before its end record.
  virtual void on_step(uint64_t /*index*/, bool /*begin*/) noexcept {}
};

// Every GPU source of this library, in start order.
std::span<GpuSource* const> gpu_sources() noexcept;

GpuSource& cupti_source() noexcept;

}  // namespace stallscope::cuda
