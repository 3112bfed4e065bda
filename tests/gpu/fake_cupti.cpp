// A fake CUPTI for test_cupti_source: records what stallscope asks of it
// (subscriber name, the order of timestamp registration and kind enabling,
// enabled kinds, flushes, unsubscribes) and, on fake_cupti_emit(), fills one
// buffer from stallscope's request callback with kernel records stamped by
// the registered timestamp callback, one zero-timestamp record and one
// record of an unknown kind, then hands it back through the complete
// callback with dropped records to report. fake_cupti_emit_device() and
// fake_cupti_emit_work() deliver one buffer with one device record, or one
// kernel, memcpy or memset record on a given device. fake_cupti_stage()
// fills a buffer that the next flush completes, on the flushing thread. The
// external correlation stack (CUSTOM2) logs pushes and pops for
// fake_cupti_external().
#include <cupti.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct State {
  int subscribers = 0;
  std::string subscriber_name;
  std::string order;  // "T" timestamp registered, "E" a kind enabled, "D" disabled, "F" flush
  std::set<int> enabled;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  CUpti_TimestampCallbackFunc timestamp = nullptr;
  size_t dropped = 0;
  int unsubscribes = 0;
  std::string external;  // "+<id>" pushed, "-<id>" popped (CUSTOM2 only)
  std::vector<uint64_t> stack;
};
State g;
constexpr size_t kSlot = sizeof(CUpti_ActivityKernel10);  // every record's room
static_assert(sizeof(CUpti_ActivityDevice5) <= kSlot && sizeof(CUpti_ActivityMemcpy6) <= kSlot &&
              sizeof(CUpti_ActivityMemset4) <= kSlot);

// Writes `n` kernel records named `name` on `stream`, correlation ids from
// `corr`, stamped now by the registered callback, `dur` long.
void fill_kernels(uint8_t* buf, int n, const char* name, uint32_t stream, uint32_t corr,
                  uint64_t dur) {
  std::memset(buf, 0, kSlot * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(buf + i * kSlot);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->name = name;
    k->streamId = stream;
    k->correlationId = corr + static_cast<uint32_t>(i);
    k->start = g.timestamp();
    k->end = k->start + dur;
  }
}

// Requests a buffer, lets `fill` write one record into its first slot and
// completes it; 0, or -1 before attach, -2 when no buffer came.
template <typename Fill>
int deliver_one(Fill fill) {
  if (g.request == nullptr || g.complete == nullptr || g.timestamp == nullptr) return -1;
  uint8_t* buf = nullptr;
  size_t size = 0, max = 0;
  g.request(&buf, &size, &max);
  if (buf == nullptr || size < kSlot) return -2;
  std::memset(buf, 0, kSlot);
  fill(buf);
  g.complete(nullptr, 0, buf, size, kSlot);
  return 0;
}

}  // namespace

FAKE_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* h, CUpti_CallbackFunc, void*,
                                          CUpti_SubscriberParams* p) {
  if (g.subscribers > 0) {
    if (p && p->oldSubscriberName)
      std::strncpy(p->oldSubscriberName, g.subscriber_name.c_str(), p->oldSubscriberSize);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  ++g.subscribers;
  g.subscriber_name = p && p->subscriberName ? p->subscriberName : "";
  *h = reinterpret_cast<CUpti_SubscriberHandle>(&g);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* h, CUpti_CallbackFunc f, void* u) {
  CUpti_SubscriberParams p{};
  p.subscriberName = "plain";
  return cuptiSubscribe_v2(h, f, u, &p);
}
FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  --g.subscribers;
  ++g.unsubscribes;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                                       CUpti_BuffersCallbackCompleteFunc c) {
  g.request = r;
  g.complete = c;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  g.timestamp = f;
  g.order += 'T';
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  g.enabled.insert(k);
  g.order += 'E';
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
  g.enabled.erase(k);
  g.order += 'D';
  return CUPTI_SUCCESS;
}
// A buffer filled by fake_cupti_stage() and not yet completed: the next
// flush completes it on the thread that flushes, as CUPTI does.
std::mutex g_staged_mu;
uint8_t* g_staged = nullptr;
size_t g_staged_size = 0, g_staged_valid = 0;
std::atomic<pid_t> g_staged_by{0};  // the thread that completed it

void complete_staged() {
  std::lock_guard lock(g_staged_mu);
  if (g_staged == nullptr) return;
  g_staged_by.store(static_cast<pid_t>(::syscall(SYS_gettid)));
  g.complete(nullptr, 0, g_staged, g_staged_size, g_staged_valid);
  g_staged = nullptr;
}

// A forced flush is logged in order; a default one (flag 0, the source's
// background thread) only counted, from whichever thread makes it. Both
// complete a staged buffer.
std::atomic<int> g_default_flushes{0};
FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  complete_staged();
  if (flag == 0) {
    ++g_default_flushes;
    return CUPTI_SUCCESS;
  }
  g.order += 'F';
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                   CUpti_Activity** rec) {
  uint8_t* next = *rec == nullptr ? buffer : reinterpret_cast<uint8_t*>(*rec) + kSlot;
  if (next + kSlot > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *rec = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* n) {
  *n = g.dropped;
  g.dropped = 0;  // CUPTI resets the count once read
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char** name) {
  *name = "cudaLaunchKernel_v7000";
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = g.timestamp ? g.timestamp() : 0;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k,
                                                               uint64_t id) {
  if (k != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) return CUPTI_ERROR_INVALID_PARAMETER;
  g.stack.push_back(id);
  g.external += "+" + std::to_string(id);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k,
                                                              uint64_t* last) {
  if (k != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 || g.stack.empty())
    return CUPTI_ERROR_QUEUE_EMPTY;
  if (last) *last = g.stack.back();
  g.external += "-" + std::to_string(g.stack.back());
  g.stack.pop_back();
  return CUPTI_SUCCESS;
}

// ---- test hooks
FAKE_EXPORT const char* fake_cupti_external() { return g.external.c_str(); }
FAKE_EXPORT int fake_cupti_default_flushes() { return g_default_flushes.load(); }
FAKE_EXPORT const char* fake_cupti_subscriber() { return g.subscriber_name.c_str(); }
FAKE_EXPORT int fake_cupti_subscribers() { return g.subscribers; }
FAKE_EXPORT int fake_cupti_unsubscribes() { return g.unsubscribes; }
FAKE_EXPORT const char* fake_cupti_order() { return g.order.c_str(); }
FAKE_EXPORT int fake_cupti_enabled(int kind) { return g.enabled.count(kind) ? 1 : 0; }

// Delivers `kernels` kernel records plus a zero-timestamp and an
// unknown-kind record; the next drop count read is `dropped`.
FAKE_EXPORT int fake_cupti_emit(int kernels, size_t dropped) {
  if (g.request == nullptr || g.complete == nullptr || g.timestamp == nullptr) return -1;
  uint8_t* buf = nullptr;
  size_t size = 0, max = 0;
  g.request(&buf, &size, &max);
  const size_t need = kSlot * (kernels + 2);
  if (buf == nullptr || size < need) return -2;
  fill_kernels(buf, kernels + 2, "fake_kernel", 7, 100, 1000);
  reinterpret_cast<CUpti_ActivityKernel10*>(buf + kernels * kSlot)->start = 0;
  reinterpret_cast<CUpti_Activity*>(buf + (kernels + 1) * kSlot)->kind =
      static_cast<CUpti_ActivityKind>(0x7001);
  g.dropped = dropped;
  g.complete(nullptr, 0, buf, size, need);
  return 0;
}

// Fills a buffer with `kernels` records of "fake_flushed_kernel" (stream 9)
// and keeps it until the next flush completes it; 0, or -1 before attach,
// -2 when no buffer came, -3 when one is staged already.
FAKE_EXPORT int fake_cupti_stage(int kernels) {
  if (g.request == nullptr || g.complete == nullptr || g.timestamp == nullptr) return -1;
  std::lock_guard lock(g_staged_mu);
  if (g_staged != nullptr) return -3;
  uint8_t* buf = nullptr;
  size_t size = 0, max = 0;
  g.request(&buf, &size, &max);
  const size_t need = kSlot * static_cast<size_t>(kernels);
  if (buf == nullptr || size < need) return -2;
  fill_kernels(buf, kernels, "fake_flushed_kernel", 9, 200, 500);
  g_staged = buf;
  g_staged_size = size;
  g_staged_valid = need;
  g_staged_by.store(0);
  return 0;
}
// The thread id that completed the staged buffer, 0 while none did.
FAKE_EXPORT int fake_cupti_staged_completed_by() { return g_staged_by.load(); }

// Delivers a device record: ordinal `id`, the 16 bytes of `uuid`, `name`,
// MIG mode `mig`.
FAKE_EXPORT int fake_cupti_emit_device(uint32_t id, const unsigned char* uuid, const char* name,
                                       int mig) {
  return deliver_one([&](uint8_t* slot) {
    auto* d = reinterpret_cast<CUpti_ActivityDevice5*>(slot);
    d->kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d->id = id;
    std::memcpy(d->uuid.bytes, uuid, sizeof d->uuid.bytes);
    d->name = name;
    d->isMigEnabled = mig ? 1 : 0;
    d->isCudaVisible = 1;
  });
}

// Delivers one record of `kind` (CONCURRENT_KERNEL "fake_device_kernel",
// MEMCPY host to device, MEMSET) that ran on `device`.
FAKE_EXPORT int fake_cupti_emit_work(int kind, uint32_t device) {
  return deliver_one([&](uint8_t* slot) {
    const uint64_t start = g.timestamp();
    if (kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(slot);
      m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
      m->bytes = 4096;
      m->start = start, m->end = start + 1000;
      m->deviceId = device;
    } else if (kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(slot);
      m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
      m->bytes = 4096;
      m->start = start, m->end = start + 1000;
      m->deviceId = device;
    } else {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(slot);
      k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      k->name = "fake_device_kernel";
      k->start = start, k->end = start + 1000;
      k->deviceId = device;
    }
  });
}
