// CUPTI activity record -> stallscope event: a pure function over the
// record structs of cupti_activity.h, so tests feed it synthetic records.
//
// Timestamps arrive in one of two clocks: CLOCK_MONOTONIC ns when CUPTI
// called our timestamp callback, else CUPTI's default CLOCK_REALTIME ns,
// shifted by a stored (monotonic - realtime) pair. Events carry
// format::kTimesNs, so readers take them as ns of the file's mono clock.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <stallscope/format.hpp>

namespace stallscope::cuda {

// The external correlation kind the CUPTI source pushes step ids under
// (index + 1). Records of other kinds are someone else's ids.
inline constexpr CUpti_ExternalCorrelationKind kStepCorrelationKind =
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

// How a record's CUPTI timestamps map to CLOCK_MONOTONIC ns.
struct CuptiClock {
  bool monotonic = true;     // timestamps come from our callback
  int64_t real_to_mono = 0;  // added to CLOCK_REALTIME ns otherwise
  int64_t to_mono(uint64_t t) const noexcept {
    return monotonic ? static_cast<int64_t>(t) : static_cast<int64_t>(t) + real_to_mono;
  }
};

// Interns names for the converter; the source caches, tests fake it.
struct NameResolver {
  virtual ~NameResolver() = default;
  virtual uint32_t name(std::string_view text) noexcept = 0;
  // The name of a runtime (`driver` false) or driver API callback id.
  virtual uint32_t api_name(bool driver, uint32_t cbid) noexcept = 0;
};

// One converted event: a core record plus at most one extension.
struct GpuEvent {
  format::CoreRecord core{};
  union {
    format::CopyExt copy;
    format::DeviceExt device;
    format::CollectiveExt coll;
    format::ApiExt api;
  } ext{};
  uint32_t ext_bytes = 0;
  // The host thread the record belongs to (API calls: the caller), 0 for
  // the thread that writes it (device activity).
  uint32_t tid = 0;
  const void* ext_data() const noexcept { return ext_bytes ? &ext : nullptr; }
};

enum class Converted : uint8_t {
  kEvent,        // *out holds an event to record
  kZeroTime,     // a timestamp was 0 or end < start: counted, not trusted
  kNotRecorded,  // a handled kind with nothing to record (host-to-host copy,
                 // stream-wait-event, which blocks no host thread; device
                 // records, read by device_identity instead)
  kUnknownKind,  // a kind this converter does not handle: counted
};

// Converts one record. Never reads past the fields every CUPTI version
// since 12.0 shares for that kind (a program may bring an older CUPTI).
Converted convert_record(const CUpti_Activity& rec, const CuptiClock& clock, NameResolver& names,
                         GpuEvent* out) noexcept;

// The collective op of an NCCL kernel name (`ncclDevKernel_AllReduce_…`,
// `ncclKernel_…`, mangled or not); kUnknown when `name` is no NCCL kernel
// and `*is_nccl` is set to whether it is one.
format::CollOp nccl_kernel_op(std::string_view name, bool* is_nccl) noexcept;

format::MemKind mem_kind(uint32_t cupti_memory_kind) noexcept;

// Which GPU a CUDA device ordinal is, from CUPTI's device record
// (CUPTI_ACTIVITY_KIND_DEVICE); stored in the trace as "cuda.device".
struct DeviceIdentity {
  uint32_t id = 0;   // CUDA device ordinal: the deviceId of kernel, copy and memset records
  std::string uuid;  // "GPU-" and 8-4-4-4-12 hex digits, as NVML and nvidia-smi print it
  std::string name;  // "NVIDIA H200"
  bool mig = false;  // MIG mode on (uuid still names the whole GPU)
};

// The identity in a device record. Reads only fields CUpti_ActivityDevice4
// (CUDA 11.6) already had at the same offsets. Throws std::bad_alloc.
DeviceIdentity device_identity(const CUpti_ActivityDevice5& record);

// "GPU-" and the 16 bytes as 8-4-4-4-12 lowercase hex digits.
std::string gpu_uuid(const CUuuid& uuid);

// The "cuda.device" attachment's JSON: {"id", "uuid", "name", "mig"}, or,
// for a device that ran work without a device record, {"id", "uuid": "",
// "name": ""}. Throws std::bad_alloc.
std::string device_json(const DeviceIdentity& device);
std::string unknown_device_json(uint32_t id);

// The device ordinal a kernel, memcpy or memset record ran on; -1 for
// records of other kinds.
int64_t work_device(const CUpti_Activity& record) noexcept;

}  // namespace stallscope::cuda
