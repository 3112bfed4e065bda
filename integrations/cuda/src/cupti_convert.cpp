// CUPTI records -> stallscope events (see cupti_convert.hpp).
#include "cupti_convert.hpp"

#include "nccl_math.hpp"

#include <cstdio>
#include <cstring>

namespace stallscope::cuda {
namespace {

using format::CoreRecord;
using format::Ext;
using format::Kind;

template <typename E>
void set_ext(GpuEvent* out, E& slot, Ext type, uint32_t aux) noexcept {
  slot = E{};
  slot.h.type = static_cast<uint8_t>(type);
  slot.h.bytes = static_cast<uint16_t>(sizeof(E));
  slot.h.aux = aux;
  out->ext_bytes = sizeof(E);
}

// Fills the core record; false when the times cannot be trusted.
bool set_core(GpuEvent* out, Kind kind, uint32_t name, uint64_t start, uint64_t end, uint64_t corr,
              const CuptiClock& clock) noexcept {
  if (start == 0 || end == 0 || end < start) return false;
  out->core = CoreRecord{};
  out->core.kind = static_cast<uint8_t>(kind);
  out->core.flags =
      uint8_t{format::kComplete} | uint8_t{format::kTimesNs} | uint8_t{format::kAsync};
  out->core.name_id = name;
  out->core.ts = static_cast<uint64_t>(clock.to_mono(start));
  out->core.value = end - start;
  out->core.corr = corr;
  out->ext_bytes = 0;
  out->tid = 0;
  return true;
}

Converted kernel(const CUpti_ActivityKernel10& k, const CuptiClock& clock, NameResolver& names,
                 GpuEvent* out) {
  const std::string_view name = k.name ? std::string_view(k.name) : std::string_view("kernel");
  bool nccl = false;
  const format::CollOp op = nccl_kernel_op(name, &nccl);
  const uint32_t id = names.name(name);
  if (!set_core(out, nccl ? Kind::kCollective : Kind::kKernel, id, k.start, k.end, k.correlationId,
                clock))
    return Converted::kZeroTime;
  if (nccl) {
    // Bytes, communicator and sequence come from the NCCL plugin's event
    // with the same stream and time; the kernel gives device time only.
    set_ext(out, out->ext.coll, Ext::kCollective, static_cast<uint32_t>(op));
    out->ext.coll.nranks = 0;  // unknown here
    out->ext.coll.peer = -1;
  } else {
    set_ext(out, out->ext.device, Ext::kDevice, k.streamId);
    out->ext.device.device = static_cast<uint16_t>(k.deviceId);
  }
  return Converted::kEvent;
}

Kind copy_kind(uint8_t cupti_copy_kind, bool* recorded) {
  *recorded = true;
  switch (cupti_copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return Kind::kH2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return Kind::kD2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      *recorded = false;
      return Kind::kD2D;
    default:
      return Kind::kD2D;  // DtoD, AtoA, AtoD, DtoA, PtoP, unknown
  }
}

Converted memcpy(const CUpti_ActivityMemcpy6& m, const CuptiClock& clock, GpuEvent* out) {
  bool recorded = true;
  const Kind kind = copy_kind(m.copyKind, &recorded);
  if (!recorded) return Converted::kNotRecorded;
  if (!set_core(out, kind, 0, m.start, m.end, m.correlationId, clock)) return Converted::kZeroTime;
  set_ext(out, out->ext.copy, Ext::kCopy, m.streamId);
  out->ext.copy.bytes = m.bytes;
  out->ext.copy.src = static_cast<uint8_t>(mem_kind(m.srcKind));
  out->ext.copy.dst = static_cast<uint8_t>(mem_kind(m.dstKind));
  out->ext.copy.device = static_cast<uint16_t>(m.deviceId);
  return Converted::kEvent;
}

Converted memset(const CUpti_ActivityMemset4& m, const CuptiClock& clock, GpuEvent* out) {
  if (!set_core(out, Kind::kMemset, 0, m.start, m.end, m.correlationId, clock))
    return Converted::kZeroTime;
  set_ext(out, out->ext.copy, Ext::kCopy, m.streamId);
  out->ext.copy.bytes = m.bytes;
  out->ext.copy.dst = static_cast<uint8_t>(mem_kind(m.memoryKind));
  out->ext.copy.device = static_cast<uint16_t>(m.deviceId);
  return Converted::kEvent;
}

// format::DeviceExt::sync_kind: 0 unknown 1 device 2 stream 3 event 4 context.
Converted sync(const CUpti_ActivitySynchronization2& s, const CuptiClock& clock,
               NameResolver& names, GpuEvent* out) {
  uint16_t sync_kind = 0;
  std::string_view name = "synchronize";
  switch (s.type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      sync_kind = 3, name = "cudaEventSynchronize";
      break;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      sync_kind = 2, name = "cudaStreamSynchronize";
      break;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      sync_kind = 4, name = "cudaDeviceSynchronize";
      break;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return Converted::kNotRecorded;  // orders streams; no host thread waits
    default:
      break;
  }
  if (!set_core(out, Kind::kSync, names.name(name), s.start, s.end, s.correlationId, clock))
    return Converted::kZeroTime;
  out->core.flags &= static_cast<uint8_t>(~format::kAsync);  // a blocked host thread nests
  set_ext(out, out->ext.device, Ext::kDevice, s.streamId);
  out->ext.device.sync_kind = sync_kind;
  return Converted::kEvent;
}

Converted api(const CUpti_ActivityAPI& a, bool driver, const CuptiClock& clock, NameResolver& names,
              GpuEvent* out) {
  if (!set_core(out, Kind::kApiCall, names.api_name(driver, a.cbid), a.start, a.end,
                a.correlationId, clock))
    return Converted::kZeroTime;
  out->core.flags &= static_cast<uint8_t>(~format::kAsync);
  set_ext(out, out->ext.api, Ext::kApi, a.cbid);
  out->ext.api.domain = static_cast<uint8_t>(driver ? format::ApiDomain::kCudaDriver
                                                    : format::ApiDomain::kCudaRuntime);
  out->ext.api.result = static_cast<int32_t>(a.returnValue);
  out->tid = a.threadId;  // the caller: recorded on its track, not on CUPTI's thread
  return Converted::kEvent;
}

// External correlation: an instant api_call record linking CUPTI's
// correlation id (corr) to the caller's external id (value). Our step ids
// are "cupti.external_correlation"; another kind's ids (the PyTorch
// profiler's operators, a program's own) are "cupti.external_correlation.kind<N>".
Converted external(const CUpti_ActivityExternalCorrelation& e, NameResolver& names, GpuEvent* out) {
  out->core = CoreRecord{};
  out->tid = 0;
  out->core.kind = static_cast<uint8_t>(Kind::kApiCall);
  out->core.flags = uint8_t{format::kInstant} | uint8_t{format::kTimesNs};
  if (e.externalKind == kStepCorrelationKind) {
    out->core.name_id = names.name("cupti.external_correlation");
  } else {
    char name[48];
    std::snprintf(name, sizeof name, "cupti.external_correlation.kind%u",
                  static_cast<unsigned>(e.externalKind));
    out->core.name_id = names.name(name);
  }
  out->core.ts = 0;  // set by the source: when the record was read
  out->core.value = e.externalId;
  out->core.corr = e.correlationId;
  out->ext_bytes = 0;
  return Converted::kEvent;
}

// A JSON string: printable ASCII as is, every other byte as \u00XX
// (device names are ASCII; the result is valid JSON whatever the bytes).
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    }
  }
  out += '"';
}

}  // namespace

std::string gpu_uuid(const CUuuid& uuid) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    s += hex;
  }
  return s;
}

DeviceIdentity device_identity(const CUpti_ActivityDevice5& record) {
  DeviceIdentity d;
  d.id = record.id;
  d.uuid = gpu_uuid(record.uuid);
  // Copied, never freed: CUPTI before 13.0 shares the name between records
  // ("should not be modified"); 13.0's header leaves it to the client.
  // Keeping one short string per device is the safe side of both.
  d.name = record.name ? record.name : "";
  d.mig = record.isMigEnabled != 0;
  return d;
}

std::string device_json(const DeviceIdentity& device) {
  std::string j = "{\"id\":" + std::to_string(device.id) + ",\"uuid\":";
  append_json_string(j, device.uuid);
  j += ",\"name\":";
  append_json_string(j, device.name);
  j += device.mig ? ",\"mig\":true}" : ",\"mig\":false}";
  return j;
}

std::string unknown_device_json(uint32_t id) {
  return "{\"id\":" + std::to_string(id) + ",\"uuid\":\"\",\"name\":\"\"}";
}

int64_t work_device(const CUpti_Activity& record) noexcept {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return reinterpret_cast<const CUpti_ActivityKernel10&>(record).deviceId;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return reinterpret_cast<const CUpti_ActivityMemcpy6&>(record).deviceId;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return reinterpret_cast<const CUpti_ActivityMemset4&>(record).deviceId;
    default:
      return -1;
  }
}

format::MemKind mem_kind(uint32_t k) noexcept {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return format::MemKind::kPageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return format::MemKind::kPinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return format::MemKind::kDevice;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return format::MemKind::kManaged;
    default:
      return format::MemKind::kUnknown;
  }
}

format::CollOp nccl_kernel_op(std::string_view name, bool* is_nccl) noexcept {
  static constexpr std::string_view kPrefixes[] = {"ncclDevKernel_", "ncclKernel_"};
  size_t at = std::string_view::npos;
  for (std::string_view p : kPrefixes) {
    const size_t pos = name.find(p);
    if (pos != std::string_view::npos) {
      at = pos + p.size();
      break;
    }
  }
  *is_nccl = at != std::string_view::npos;
  if (!*is_nccl) return format::CollOp::kUnknown;
  return nccl_op_prefix(name.substr(at));
}

Converted convert_record(const CUpti_Activity& rec, const CuptiClock& clock, NameResolver& names,
                         GpuEvent* out) noexcept {
  switch (rec.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return kernel(reinterpret_cast<const CUpti_ActivityKernel10&>(rec), clock, names, out);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return memcpy(reinterpret_cast<const CUpti_ActivityMemcpy6&>(rec), clock, out);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return memset(reinterpret_cast<const CUpti_ActivityMemset4&>(rec), clock, out);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sync(reinterpret_cast<const CUpti_ActivitySynchronization2&>(rec), clock, names, out);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return api(reinterpret_cast<const CUpti_ActivityAPI&>(rec),
                 rec.kind == CUPTI_ACTIVITY_KIND_DRIVER, clock, names, out);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return external(reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(rec), names, out);
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return Converted::kNotRecorded;  // no event: the source keeps its device_identity
    default:
      return Converted::kUnknownKind;
  }
}

}  // namespace stallscope::cuda
