// The C API of trace format 1.1 (trace.h): the input pipeline seen from
// inside (samples, loader configurations, batch and channel hand-offs) and
// stack samples, over the typed recorders of trace.hpp.
#include <cerrno>
#include <cstring>

#include "stallscope/trace.h"
#include "stallscope/trace.hpp"

using namespace stallscope;

namespace {

// The C enums are the format's values.
static_assert(STALLSCOPE_SAMPLE == static_cast<int>(format::Kind::kSample));
static_assert(STALLSCOPE_STACK_SAMPLE == static_cast<int>(format::Kind::kMaxKnown));
static_assert(STALLSCOPE_SAMPLE_COLLATE == static_cast<int>(format::SamplePart::kCollate));
static_assert(STALLSCOPE_MP_FORKSERVER == static_cast<int>(format::MpContext::kForkserver));
static_assert(STALLSCOPE_DATASET_ITERABLE == static_cast<int>(format::DatasetKind::kIterable));
static_assert(STALLSCOPE_PIN_INACTIVE == static_cast<int>(format::PinMemory::kInactive));
static_assert(STALLSCOPE_LOADER_GETITEMS == format::kLoaderGetItems &&
              STALLSCOPE_LOADER_OVERRIDDEN == format::kLoaderOverridden);
static_assert(STALLSCOPE_CHANNEL_SEMAPHORE == static_cast<int>(format::ChannelType::kSemaphore));
static_assert(STALLSCOPE_CPU_BLOCKED == static_cast<int>(format::OnCpu::kBlocked));
static_assert(STALLSCOPE_STACK_LATE == format::kStackLate &&
              STALLSCOPE_STACK_TRUNCATED == format::kStackTruncated &&
              STALLSCOPE_STACK_NATIVE == format::kStackNative);
static_assert(sizeof(stallscope_loader_config) == STALLSCOPE_LOADER_CONFIG_SIZE_V1);

constexpr uint8_t kLoaderFlags = STALLSCOPE_LOADER_GETITEMS | STALLSCOPE_LOADER_OVERRIDDEN;
constexpr uint32_t kStackFlags =
    STALLSCOPE_STACK_LATE | STALLSCOPE_STACK_TRUNCATED | STALLSCOPE_STACK_NATIVE;

// What the typed recorders' false means: capture off, or dropped.
int result(bool recorded) { return recorded ? 0 : enabled() ? -ENOBUFS : -ENODEV; }

bool valid_loader_config(const stallscope_loader_config& c) {
  return c.pin_memory <= STALLSCOPE_PIN_INACTIVE && c.persistent_workers <= 1 &&
         c.drop_last <= 1 && c.in_order <= 1 && c.mp_context <= STALLSCOPE_MP_FORKSERVER &&
         c.dataset_kind <= STALLSCOPE_DATASET_ITERABLE && (c.flags & ~kLoaderFlags) == 0;
}

LoaderConfig loader_config_of(const stallscope_loader_config& c) {
  LoaderConfig l;
  l.loader_id = c.loader_id;
  l.generation = c.generation;
  l.num_workers = c.num_workers;
  l.prefetch_factor = c.prefetch_factor;
  l.batch_size = c.batch_size;
  l.timeout_ms = c.timeout_ms;
  l.dataset_len = c.dataset_len;
  l.dataset_name = c.dataset_name;
  l.collate_name = c.collate_name;
  l.sampler_name = c.sampler_name;
  l.batch_sampler_name = c.batch_sampler_name;
  l.site_name = c.site_name;
  l.pin_memory = static_cast<format::PinMemory>(c.pin_memory);
  l.persistent_workers = c.persistent_workers != 0;
  l.drop_last = c.drop_last != 0;
  l.in_order = c.in_order != 0;
  l.mp_context = static_cast<format::MpContext>(c.mp_context);
  l.dataset_kind = static_cast<format::DatasetKind>(c.dataset_kind);
  l.flags = c.flags;
  return l;
}

}  // namespace

extern "C" {

int stallscope_sample_record(uint64_t start, uint64_t end, uint64_t loader_id,
                             uint32_t generation, uint64_t batch_index, uint64_t sample_index,
                             int32_t worker, uint32_t part, uint32_t count) {
  if (end < start || part > STALLSCOPE_SAMPLE_COLLATE) return -EINVAL;
  if (!enabled()) return -ENODEV;
  const Sample s{loader_id, generation, batch_index, sample_index,
                 worker,    count,      static_cast<format::SamplePart>(part)};
  return result(record_sample(start, end, s));
}

int stallscope_loader_config_record(const stallscope_loader_config* c) {
  if (c == nullptr || c->size < STALLSCOPE_LOADER_CONFIG_SIZE_V1) return -EINVAL;
  // A newer caller's longer struct: the fields this library knows.
  stallscope_loader_config v;
  std::memcpy(&v, c, sizeof v);
  if (!valid_loader_config(v)) return -EINVAL;
  if (!enabled()) return -ENODEV;
  return result(record_loader_config(v.ts != 0 ? v.ts : ticks_now(), loader_config_of(v)));
}

int stallscope_batch_handoff_record(uint64_t put, uint64_t received, uint64_t requested,
                                    uint64_t loader_id, uint32_t generation,
                                    uint64_t batch_index, int32_t worker, uint32_t worker_pid) {
  if (received < put) return -EINVAL;
  if (!enabled()) return -ENODEV;
  const BatchHandoff h{loader_id, generation, batch_index, worker, worker_pid, requested};
  return result(record_batch_handoff(put, received, h));
}

int stallscope_channel_handoff_record(uint64_t put, uint64_t got, uint64_t requested,
                                      uint64_t channel_id, uint32_t channel_type,
                                      uint32_t producer_pid, uint32_t producer_tid,
                                      uint32_t consumer_pid, uint32_t consumer_tid,
                                      uint64_t object_id, uint64_t bytes, uint32_t parts) {
  if (got < put || channel_type > STALLSCOPE_CHANNEL_SEMAPHORE) return -EINVAL;
  if (!enabled()) return -ENODEV;
  ChannelHandoff h;
  h.channel_id = channel_id;
  h.type = static_cast<format::ChannelType>(channel_type);
  h.producer_pid = producer_pid;
  h.producer_tid = producer_tid;
  h.consumer_pid = consumer_pid;
  h.consumer_tid = consumer_tid;
  h.object_id = object_id;
  h.bytes = bytes;
  h.parts = parts;
  h.requested = requested;
  return result(record_channel_handoff(put, got, h));
}

int stallscope_stack_sample_record(uint64_t ts, uint32_t tid, uint64_t interval_ns,
                                   uint32_t cost_ns, uint32_t on_cpu, uint32_t flags,
                                   const stallscope_name_t* frames, uint32_t n_frames) {
  if ((frames == nullptr && n_frames != 0) || on_cpu > STALLSCOPE_CPU_BLOCKED ||
      (flags & ~kStackFlags) != 0)
    return -EINVAL;
  if (!enabled()) return -ENODEV;
  const StackSample s{tid, interval_ns, cost_ns, static_cast<format::OnCpu>(on_cpu),
                      static_cast<uint8_t>(flags)};
  return result(record_stack_sample(ts, s, {frames, n_frames}));
}

}  // extern "C"
