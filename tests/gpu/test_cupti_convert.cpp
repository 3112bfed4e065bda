// The CUPTI record converter over synthetic records of every handled kind,
// zero timestamps, unknown kinds and both clocks; device records' identity
// and its "cuda.device" JSON.
#include <cstring>
#include <map>
#include <string>

#include <boost/test/unit_test.hpp>

#include "cuda_config.hpp"
#include "cupti_convert.hpp"

namespace sc = stallscope::cuda;
namespace fmt = stallscope::format;

namespace {

struct FakeNames final : sc::NameResolver {
  std::map<std::string, uint32_t> ids;
  uint32_t name(std::string_view t) noexcept override {
    auto [it, added] = ids.emplace(std::string(t), static_cast<uint32_t>(ids.size() + 1));
    return it->second;
  }
  uint32_t api_name(bool driver, uint32_t cbid) noexcept override {
    return name((driver ? "drv" : "rt") + std::to_string(cbid));
  }
};

const sc::CuptiClock kMono{true, 0};

template <typename R>
sc::Converted convert(const R& r, sc::GpuEvent* ev, FakeNames& names,
                      const sc::CuptiClock& clock = kMono) {
  return sc::convert_record(reinterpret_cast<const CUpti_Activity&>(r), clock, names, ev);
}

CUpti_ActivityKernel10 kernel(const char* name, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.deviceId = 2;
  k.streamId = 7;
  k.correlationId = 41;
  return k;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cupti_convert)

BOOST_AUTO_TEST_CASE(kernel_becomes_a_kernel_event_with_device_stream_and_ns_times) {
  FakeNames names;
  sc::GpuEvent ev;
  BOOST_TEST(static_cast<int>(convert(kernel("gemm", 1000, 1500), &ev, names)) ==
             static_cast<int>(sc::Converted::kEvent));
  BOOST_TEST(ev.core.kind == static_cast<uint8_t>(fmt::Kind::kKernel));
  BOOST_TEST((ev.core.flags & fmt::kTimesNs) != 0);
  BOOST_TEST((ev.core.flags & fmt::kPhaseMask) == fmt::kComplete);
  BOOST_TEST(ev.core.ts == 1000u);
  BOOST_TEST(ev.core.value == 500u);
  BOOST_TEST(ev.core.corr == 41u);
  BOOST_TEST(ev.core.name_id == names.ids.at("gemm"));
  BOOST_TEST(ev.ext_bytes == sizeof(fmt::DeviceExt));
  BOOST_TEST(ev.ext.device.h.type == static_cast<uint8_t>(fmt::Ext::kDevice));
  BOOST_TEST(ev.ext.device.h.aux == 7u);
  BOOST_TEST(ev.ext.device.device == 2u);
}

BOOST_AUTO_TEST_CASE(realtime_clock_is_shifted_by_the_stored_pair) {
  FakeNames names;
  sc::GpuEvent ev;
  const sc::CuptiClock real{false, -900};
  convert(kernel("k", 1000, 1100), &ev, names, real);
  BOOST_TEST(ev.core.ts == 100u);
  BOOST_TEST(ev.core.value == 100u);
}

BOOST_AUTO_TEST_CASE(zero_or_reversed_timestamps_are_counted_not_trusted) {
  FakeNames names;
  sc::GpuEvent ev;
  BOOST_TEST(static_cast<int>(convert(kernel("k", 0, 10), &ev, names)) ==
             static_cast<int>(sc::Converted::kZeroTime));
  BOOST_TEST(static_cast<int>(convert(kernel("k", 10, 0), &ev, names)) ==
             static_cast<int>(sc::Converted::kZeroTime));
  BOOST_TEST(static_cast<int>(convert(kernel("k", 20, 10), &ev, names)) ==
             static_cast<int>(sc::Converted::kZeroTime));
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.start = 0;
  m.end = 0;
  BOOST_TEST(static_cast<int>(convert(m, &ev, names)) ==
             static_cast<int>(sc::Converted::kZeroTime));
}

BOOST_AUTO_TEST_CASE(unknown_kinds_are_reported_as_such) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivityAPI r{};
  r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  BOOST_TEST(static_cast<int>(convert(r, &ev, names)) ==
             static_cast<int>(sc::Converted::kUnknownKind));
  r.kind = static_cast<CUpti_ActivityKind>(0x7000);
  BOOST_TEST(static_cast<int>(convert(r, &ev, names)) ==
             static_cast<int>(sc::Converted::kUnknownKind));
}

BOOST_AUTO_TEST_CASE(nccl_kernels_become_collectives_mangled_or_not) {
  FakeNames names;
  sc::GpuEvent ev;
  convert(kernel("_Z36ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K", 5, 9), &ev,
          names);
  BOOST_TEST(ev.core.kind == static_cast<uint8_t>(fmt::Kind::kCollective));
  BOOST_TEST(ev.ext.coll.h.type == static_cast<uint8_t>(fmt::Ext::kCollective));
  BOOST_TEST((ev.ext.coll.h.aux & 0xff) == static_cast<uint32_t>(fmt::CollOp::kAllReduce));
  BOOST_TEST(ev.ext.coll.peer == -1);
  convert(kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t", 5, 9), &ev, names);
  BOOST_TEST((ev.ext.coll.h.aux & 0xff) == static_cast<uint32_t>(fmt::CollOp::kAllGather));
  convert(kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 5, 9), &ev, names);
  BOOST_TEST((ev.ext.coll.h.aux & 0xff) == static_cast<uint32_t>(fmt::CollOp::kReduceScatter));
  convert(kernel("ncclDevKernel_SendRecv", 5, 9), &ev, names);
  BOOST_TEST((ev.ext.coll.h.aux & 0xff) == static_cast<uint32_t>(fmt::CollOp::kSend));
  convert(kernel("my_nccl_like_kernel", 5, 9), &ev, names);
  BOOST_TEST(ev.core.kind == static_cast<uint8_t>(fmt::Kind::kKernel));
}

BOOST_AUTO_TEST_CASE(memcpy_keeps_direction_bytes_and_pageable_or_pinned) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.start = 100;
  m.end = 300;
  m.bytes = 1 << 20;
  m.deviceId = 1;
  m.streamId = 3;
  m.correlationId = 9;
  const struct {
    uint8_t cupti, src, dst;
    fmt::Kind kind;
    fmt::MemKind want_src, want_dst;
  } cases[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, fmt::Kind::kH2D, fmt::MemKind::kPageable,
       fmt::MemKind::kDevice},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, fmt::Kind::kH2D, fmt::MemKind::kPinned,
       fmt::MemKind::kDevice},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
       CUPTI_ACTIVITY_MEMORY_KIND_PINNED, fmt::Kind::kD2H, fmt::MemKind::kDevice,
       fmt::MemKind::kPinned},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
       CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, fmt::Kind::kD2D, fmt::MemKind::kDevice,
       fmt::MemKind::kManaged},
      {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, fmt::Kind::kD2D, fmt::MemKind::kDevice,
       fmt::MemKind::kDevice},
  };
  for (const auto& c : cases) {
    m.copyKind = c.cupti;
    m.srcKind = c.src;
    m.dstKind = c.dst;
    BOOST_TEST_REQUIRE(static_cast<int>(convert(m, &ev, names)) ==
                       static_cast<int>(sc::Converted::kEvent));
    BOOST_TEST(ev.core.kind == static_cast<uint8_t>(c.kind));
    BOOST_TEST(ev.ext.copy.h.type == static_cast<uint8_t>(fmt::Ext::kCopy));
    BOOST_TEST(ev.ext.copy.bytes == (1u << 20));
    BOOST_TEST(ev.ext.copy.src == static_cast<uint8_t>(c.want_src));
    BOOST_TEST(ev.ext.copy.dst == static_cast<uint8_t>(c.want_dst));
    BOOST_TEST(ev.ext.copy.device == 1u);
    BOOST_TEST(ev.ext.copy.h.aux == 3u);
    BOOST_TEST(ev.core.value == 200u);
  }
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
  BOOST_TEST(static_cast<int>(convert(m, &ev, names)) ==
             static_cast<int>(sc::Converted::kNotRecorded));
}

BOOST_AUTO_TEST_CASE(memset_is_a_memset_with_bytes_and_destination_kind) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.start = 10;
  m.end = 15;
  m.bytes = 4096;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.streamId = 4;
  BOOST_TEST_REQUIRE(static_cast<int>(convert(m, &ev, names)) ==
                     static_cast<int>(sc::Converted::kEvent));
  BOOST_TEST(ev.core.kind == static_cast<uint8_t>(fmt::Kind::kMemset));
  BOOST_TEST(ev.ext.copy.bytes == 4096u);
  BOOST_TEST(ev.ext.copy.dst == static_cast<uint8_t>(fmt::MemKind::kDevice));
  BOOST_TEST(ev.ext.copy.h.aux == 4u);
}

BOOST_AUTO_TEST_CASE(synchronization_records_name_what_the_host_waited_for) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.start = 50;
  s.end = 90;
  s.streamId = 6;
  s.correlationId = 12;
  const struct {
    CUpti_ActivitySynchronizationType type;
    uint16_t sync_kind;
    const char* name;
  } cases[] = {
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 2, "cudaStreamSynchronize"},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 3, "cudaEventSynchronize"},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 4, "cudaDeviceSynchronize"}};
  for (const auto& c : cases) {
    s.type = c.type;
    BOOST_TEST_REQUIRE(static_cast<int>(convert(s, &ev, names)) ==
                       static_cast<int>(sc::Converted::kEvent));
    BOOST_TEST(ev.core.kind == static_cast<uint8_t>(fmt::Kind::kSync));
    BOOST_TEST(ev.ext.device.sync_kind == c.sync_kind);
    BOOST_TEST(ev.core.name_id == names.ids.at(c.name));
    BOOST_TEST((ev.core.flags & fmt::kAsync) == 0);
    BOOST_TEST(ev.core.corr == 12u);
  }
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  BOOST_TEST(static_cast<int>(convert(s, &ev, names)) ==
             static_cast<int>(sc::Converted::kNotRecorded));
}

BOOST_AUTO_TEST_CASE(api_records_carry_correlation_callback_id_and_domain) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = 211;
  a.start = 70;
  a.end = 80;
  a.correlationId = 41;
  a.returnValue = 0;
  a.threadId = 4321;
  BOOST_TEST_REQUIRE(static_cast<int>(convert(a, &ev, names)) ==
                     static_cast<int>(sc::Converted::kEvent));
  BOOST_TEST(ev.core.kind == static_cast<uint8_t>(fmt::Kind::kApiCall));
  BOOST_TEST(ev.tid == 4321u);  // recorded on the caller's track
  BOOST_TEST(ev.core.corr == 41u);  // the kernel of the first case has corr 41 too
  BOOST_TEST(ev.ext.api.h.aux == 211u);
  BOOST_TEST(ev.ext.api.domain == static_cast<uint8_t>(fmt::ApiDomain::kCudaRuntime));
  BOOST_TEST(ev.core.name_id == names.ids.at("rt211"));
  a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  a.returnValue = 700;
  convert(a, &ev, names);
  BOOST_TEST(ev.ext.api.domain == static_cast<uint8_t>(fmt::ApiDomain::kCudaDriver));
  BOOST_TEST(ev.ext.api.result == 700);
  // The same event object reused for a kernel: device activity is the writer's own.
  convert(kernel("k", 1000, 1100), &ev, names);
  BOOST_TEST(ev.tid == 0u);
}

BOOST_AUTO_TEST_CASE(external_correlation_links_cupti_and_external_ids) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivityExternalCorrelation e{};
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
  e.externalId = 0xabcdef;
  e.correlationId = 41;
  BOOST_TEST_REQUIRE(static_cast<int>(convert(e, &ev, names)) ==
                     static_cast<int>(sc::Converted::kEvent));
  BOOST_TEST((ev.core.flags & fmt::kPhaseMask) == fmt::kInstant);
  BOOST_TEST(ev.core.corr == 41u);
  BOOST_TEST(ev.core.value == 0xabcdefu);
  BOOST_TEST(ev.ext_bytes == 0u);
  BOOST_TEST(ev.core.name_id == names.ids.at("cupti.external_correlation"));
  // Another kind's ids (the PyTorch profiler's CUSTOM0) are kept apart from the step ids.
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  BOOST_TEST_REQUIRE(static_cast<int>(convert(e, &ev, names)) ==
                     static_cast<int>(sc::Converted::kEvent));
  BOOST_TEST(ev.core.name_id == names.ids.at("cupti.external_correlation.kind" +
                                             std::to_string(int{CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0})));
}

BOOST_AUTO_TEST_CASE(device_record_gives_ordinal_uuid_as_nvidia_smi_prints_it_name_and_mig) {
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 5;
  const unsigned char bytes[16] = {0x00, 0x1f, 0x80, 0xff, 0xab, 0xcd, 0x0e, 0xf0,
                                   0x12, 0x34, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x7f};
  std::memcpy(d.uuid.bytes, bytes, 16);
  d.name = "NVIDIA H200";
  d.isMigEnabled = 1;
  const sc::DeviceIdentity id = sc::device_identity(d);
  BOOST_TEST(id.id == 5u);
  BOOST_TEST(id.uuid == "GPU-001f80ff-abcd-0ef0-1234-9abcdef0017f");  // bytes past 0x7f unsigned
  BOOST_TEST(id.name == "NVIDIA H200");
  BOOST_TEST(id.mig);
  d.isMigEnabled = 0;
  d.name = nullptr;
  BOOST_TEST(!sc::device_identity(d).mig);
  BOOST_TEST(sc::device_identity(d).name == "");
}

BOOST_AUTO_TEST_CASE(device_records_make_no_event_and_name_no_work_device) {
  FakeNames names;
  sc::GpuEvent ev;
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 1;
  BOOST_TEST(static_cast<int>(convert(d, &ev, names)) ==
             static_cast<int>(sc::Converted::kNotRecorded));
  BOOST_TEST(sc::work_device(reinterpret_cast<const CUpti_Activity&>(d)) == -1);
  const auto k = kernel("gemm", 1000, 1500);  // deviceId 2
  BOOST_TEST(sc::work_device(reinterpret_cast<const CUpti_Activity&>(k)) == 2);
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.deviceId = 7;
  BOOST_TEST(sc::work_device(reinterpret_cast<const CUpti_Activity&>(m)) == 7);
  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.deviceId = 3;
  BOOST_TEST(sc::work_device(reinterpret_cast<const CUpti_Activity&>(s)) == 3);
}

BOOST_AUTO_TEST_CASE(device_json_escapes_the_name) {
  sc::DeviceIdentity d{1, "GPU-00000000-0000-0000-0000-000000000001", "A \"B\"\\\n\xc3", true};
  BOOST_TEST(sc::device_json(d) == R"({"id":1,"uuid":"GPU-00000000-0000-0000-0000-000000000001",)"
                                   R"("name":"A \"B\"\\\u000a\u00c3","mig":true})");
  BOOST_TEST(sc::unknown_device_json(4) == R"({"id":4,"uuid":"","name":""})");
}

// STALLSCOPE_CUPTI_STEP_IDS: unset, 1/on tag; 0/off do not; anything else
// keeps tagging and says why, naming the variable and the value.
BOOST_AUTO_TEST_CASE(step_ids_variable_is_parsed_and_a_bad_value_named) {
  std::string why;
  BOOST_TEST(sc::parse_step_ids(nullptr, &why));
  BOOST_TEST(sc::parse_step_ids("on", &why));
  BOOST_TEST(sc::parse_step_ids("1", &why));
  BOOST_TEST(why.empty());
  BOOST_TEST(!sc::parse_step_ids("0", &why));
  BOOST_TEST(!sc::parse_step_ids("off", &why));
  BOOST_TEST(why.empty());
  BOOST_TEST(sc::parse_step_ids("yes please", &why));
  BOOST_TEST(why == "STALLSCOPE_CUPTI_STEP_IDS='yes please': not on or off (expected on, off, 1, "
                    "0, true, false); using the default on");
}

BOOST_AUTO_TEST_SUITE_END()
