// The NCCL profiler plugin: NCCL dlopens libstallscope_cuda.so when
// NCCL_PROFILER_PLUGIN names it and takes the newest `ncclProfiler_vN` it
// knows. Every version shares one implementation; only the descriptor
// layout differs. Collective and p2p events are recorded as host-side
// spans: their end means "enqueued", device time comes from the CUPTI
// source's NCCL kernels.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "cuda_log.hpp"
#include "nccl_events.hpp"
#include "stallscope/cuda/nccl_profiler_v4.h"
#include "stallscope/cuda/nccl_profiler_v6.h"

#define STALLSCOPE_CUDA_EXPORT __attribute__((visibility("default")))

namespace stallscope::cuda {
namespace {

constexpr int kActivation = ncclProfileColl | ncclProfileP2p;

struct Event {
  Ticks start = 0;
  Collective coll;
};

uint32_t op_name(format::CollOp op) noexcept {
  static std::atomic<uint32_t> ids[16];
  const auto i = static_cast<size_t>(op) & 15u;
  uint32_t id = ids[i].load(std::memory_order_relaxed);
  if (id != 0) return id;
  static constexpr const char* kNames[] = {
      "nccl",       "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast",
      "ncclReduce", "ncclAllToAll",  "ncclSend",      "ncclRecv",          "ncclBarrier"};
  id = intern(i < std::size(kNames) ? kNames[i] : "nccl");
  ids[i].store(id, std::memory_order_relaxed);
  return id;
}

void say_loaded(int version, const NcclComm& c) noexcept {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  note("NCCL profiler plugin v%d loaded (communicator %016llx, rank %u of %u)", version,
       static_cast<unsigned long long>(c.id), c.rank, c.nranks);
}

// The preload shim interposes NCCL's calls where this plugin is not loaded;
// once it is, the shim must only pass them through (no call recorded twice).
void tell_preload_shim(int version) noexcept {
  static std::atomic<bool> told{false};
  if (told.exchange(true)) return;
  using Tell = void (*)(int) noexcept;
  if (void* f = ::dlsym(RTLD_DEFAULT, "stallscope_preload_nccl_plugin_v1"))
    reinterpret_cast<Tell>(f)(version);
}

ncclResult_t init_common(void** context, int* mask, uint64_t comm_id, int nranks, int rank,
                         int version) noexcept {
  auto* c = new (std::nothrow) NcclComm;
  if (c == nullptr) return ncclSystemError;
  c->id = comm_id;
  c->rank = rank < 0 ? 0u : static_cast<uint32_t>(rank);
  c->nranks = nranks < 1 ? 1u : static_cast<uint32_t>(nranks);
  *context = c;
  *mask = kActivation;
  say_loaded(version, *c);
  tell_preload_shim(version);
  return ncclSuccess;
}

// Starts an event for a collective or p2p call; other types get no handle.
template <typename Descr>
ncclResult_t start_common(void* context, void** handle, const Descr* d) noexcept {
  *handle = nullptr;
  if (context == nullptr || d == nullptr || !enabled()) return ncclSuccess;
  auto& comm = *static_cast<NcclComm*>(context);
  Collective c;
  if (d->type == ncclProfileColl) {
    c = nccl_collective(comm, d->coll.func ? d->coll.func : "", d->coll.count,
                        d->coll.datatype ? d->coll.datatype : "", -1);
  } else if (d->type == ncclProfileP2p) {
    c = nccl_collective(comm, d->p2p.func ? d->p2p.func : "", d->p2p.count,
                        d->p2p.datatype ? d->p2p.datatype : "", d->p2p.peer);
  } else {
    return ncclSuccess;
  }
  auto* e = new (std::nothrow) Event;
  if (e == nullptr) return ncclSuccess;  // dropped, the job goes on
  e->coll = c;
  e->coll.name = op_name(c.op);
  e->start = ticks_now();
  *handle = e;
  return ncclSuccess;
}

ncclResult_t stop_event(void* handle) noexcept {
  auto* e = static_cast<Event*>(handle);
  if (e == nullptr) return ncclSuccess;
  record_collective(e->start, ticks_now(), e->coll);
  delete e;
  return ncclSuccess;
}

ncclResult_t finalize(void* context) noexcept {
  delete static_cast<NcclComm*>(context);
  return ncclSuccess;
}

ncclResult_t init_v4(void** context, int* mask, const char*, uint64_t comm_hash, int, int nranks,
                     int rank, ncclDebugLogger_t) {
  return init_common(context, mask, comm_hash, nranks, rank, 4);
}
ncclResult_t init_v5(void** context, uint64_t comm_id, int* mask, const char*, int, int nranks,
                     int rank, ncclDebugLogger_t) {
  return init_common(context, mask, comm_id, nranks, rank, 5);
}
ncclResult_t init_v6(void** context, uint64_t comm_id, int* mask, const char*, int, int nranks,
                     int rank, ncclDebugLogger_t) {
  return init_common(context, mask, comm_id, nranks, rank, 6);
}
ncclResult_t start_v4(void* context, void** handle, ncclProfilerEventDescr_v4_t* d) {
  return start_common(context, handle, d);
}
ncclResult_t start_v5(void* context, void** handle, ncclProfilerEventDescr_v5_t* d) {
  return start_common(context, handle, d);
}
ncclResult_t start_v6(void* context, void** handle, ncclProfilerEventDescr_v6_t* d) {
  return start_common(context, handle, d);
}
ncclResult_t state_v4(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v4_t*) {
  return ncclSuccess;
}
ncclResult_t state_v5(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v5_t*) {
  return ncclSuccess;
}

}  // namespace
}  // namespace stallscope::cuda

namespace sc = stallscope::cuda;
extern "C" {
STALLSCOPE_CUDA_EXPORT ncclProfiler_v4_t ncclProfiler_v4 = {
    "stallscope", sc::init_v4, sc::start_v4, sc::stop_event, sc::state_v4, sc::finalize};
STALLSCOPE_CUDA_EXPORT ncclProfiler_v5_t ncclProfiler_v5 = {
    "stallscope", sc::init_v5, sc::start_v5, sc::stop_event, sc::state_v5, sc::finalize};
STALLSCOPE_CUDA_EXPORT ncclProfiler_v6_t ncclProfiler_v6 = {
    "stallscope", sc::init_v6, sc::start_v6, sc::stop_event, sc::state_v5, sc::finalize};
}  // extern "C"
