// NCCL collectives and point-to-point calls of a dynamically linked libnccl,
// for programs whose NCCL does not load stallscope's profiler plugin (older
// than 2.26, or NCCL_PROFILER_PLUGIN unset). Each successful call becomes a
// `collective` event on the calling thread spanning the call: the host-side
// enqueue, not the device-side transfer (docs/gpu.md). Once the plugin says
// it is loaded (stallscope_preload_nccl_plugin_v1), the plugin records the
// collectives and the calls are flagged join-only (format::kCollJoinOnly):
// NCCL starts the plugin's events after it launched the kernel, so only the
// call's span ties the kernel CUPTI records to its call.
//
// A communicator's id is the same in every rank, so that the analyzer can
// match one collective across ranks by (id, sequence number): a hash of the
// ncclUniqueId it was created from (ncclCommInitRank, …Config), or, for
// ncclCommSplit, of its parent's id, the color and how many splits of that
// parent came before (every rank splits collectively, in the same order).
// A communicator the shim did not see created (ncclCommInitAll, or created
// before the shim was loaded) gets an id from its handle: one per process,
// so its collectives are not matched across ranks.
#include <cerrno>
#include <cstdio>

#include <stallscope/trace.hpp>

#include "nccl_abi.hpp"
#include "real.hpp"
#include "shim.hpp"

namespace pl = stallscope::preload;
using stallscope::format::CollOp;

namespace {

// Serves a call that reaches the shim although no libnccl is loaded (a
// program that found the shim's symbol with dlsym(RTLD_DEFAULT, …)).
template <typename... A>
ncclResult_t unavailable(A...) {
  return pl::kNcclSystemError;
}

STALLSCOPE_REAL(ncclAllReduce, &unavailable);
STALLSCOPE_REAL(ncclBroadcast, &unavailable);
STALLSCOPE_REAL(ncclReduce, &unavailable);
STALLSCOPE_REAL(ncclAllGather, &unavailable);
STALLSCOPE_REAL(ncclReduceScatter, &unavailable);
STALLSCOPE_REAL(ncclSend, &unavailable);
STALLSCOPE_REAL(ncclRecv, &unavailable);
STALLSCOPE_REAL(ncclCommInitRank, &unavailable);
STALLSCOPE_REAL(ncclCommInitRankConfig, &unavailable);
STALLSCOPE_REAL(ncclCommSplit, &unavailable);
STALLSCOPE_REAL(ncclCommDestroy, &unavailable);
STALLSCOPE_REAL(ncclCommAbort, &unavailable);
STALLSCOPE_REAL(ncclCommCount, nullptr);
STALLSCOPE_REAL(ncclCommUserRank, nullptr);
STALLSCOPE_REAL(ncclGetVersion, nullptr);

std::atomic<bool> g_plugin{false};  // our NCCL profiler plugin records instead

// One communicator, keyed by its handle. A slot is never freed: a destroyed
// communicator's slot is reset (new generation, so a new id) and serves the
// next communicator NCCL places at the same address.
struct CommSlot {
  std::atomic<uintptr_t> key{0};
  std::atomic<uint32_t> generation{0};
  std::atomic<uint32_t> rank{0};
  std::atomic<uint32_t> nranks{0};  // 0 = not asked yet
  std::atomic<uint64_t> next_seq{0};
  std::atomic<uint64_t> shared_id{0};  // the same in every rank; 0 = not seen created
  std::atomic<uint32_t> splits{0};     // ncclCommSplit calls on this communicator
};
constexpr size_t kSlots = 1024;
CommSlot g_comms[kSlots];

uint64_t mix(uint64_t x) noexcept {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

CommSlot* comm_slot(ncclComm_t comm, bool insert) noexcept {
  const auto key = reinterpret_cast<uintptr_t>(comm);
  const uint64_t h = mix(key);
  for (size_t i = 0; i < kSlots; ++i) {
    CommSlot& s = g_comms[(h + i) & (kSlots - 1)];
    uintptr_t cur = s.key.load(std::memory_order_acquire);
    if (cur == key) return &s;
    if (cur != 0) continue;
    if (!insert) return nullptr;
    if (s.key.compare_exchange_strong(cur, key, std::memory_order_acq_rel)) return &s;
    if (cur == key) return &s;
  }
  return nullptr;
}

void say_once(std::atomic<bool>& said, const char* text) noexcept {
  if (!said.exchange(true, std::memory_order_relaxed)) pl::shim_note(text);
}

void say_interposed() noexcept {
  static std::atomic<bool> said{false};
  if (said.load(std::memory_order_relaxed)) return;
  int v = 0;
  auto get_version = real_ncclGetVersion.get();
  if (get_version == nullptr || get_version(&v) != pl::kNcclSuccess) v = 0;
  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 before.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
  char text[160];
  std::snprintf(text, sizeof text,
                "NCCL %d.%d.%d calls interposed (no profiler plugin): collectives recorded "
                "as host-side enqueues",
                major, minor, v % 100);
  say_once(said, text);
}

// Rank and size as the real NCCL reports them, asked once per communicator.
void comm_facts(CommSlot& s, ncclComm_t comm, stallscope::Collective& c) noexcept {
  uint32_t n = s.nranks.load(std::memory_order_acquire);
  if (n == 0) {
    int count = 0, rank = 0;
    auto fc = real_ncclCommCount.get();
    auto fr = real_ncclCommUserRank.get();
    if (fc != nullptr && fr != nullptr && fc(comm, &count) == pl::kNcclSuccess &&
        fr(comm, &rank) == pl::kNcclSuccess && count > 0 && rank >= 0) {
      s.rank.store(static_cast<uint32_t>(rank), std::memory_order_relaxed);
      s.nranks.store(static_cast<uint32_t>(count), std::memory_order_release);
      n = static_cast<uint32_t>(count);
    }
  }
  c.rank = n == 0 ? 0 : s.rank.load(std::memory_order_relaxed);
  c.nranks = n == 0 ? 1 : n;  // NCCL would not tell: shown as rank 0 of 1
}

stallscope::NameId op_name(CollOp op) noexcept {
  static std::atomic<uint32_t> ids[16];
  static constexpr const char* kNames[] = {
      "nccl",       "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast",
      "ncclReduce", "ncclAllToAll",  "ncclSend",      "ncclRecv",          "ncclBarrier"};
  const auto i = static_cast<size_t>(op) & 15u;
  uint32_t id = ids[i].load(std::memory_order_relaxed);
  if (id != 0) return id;
  id = stallscope::intern(i < std::size(kNames) ? kNames[i] : "nccl");
  ids[i].store(id, std::memory_order_relaxed);
  return id;
}

struct CallArgs {
  CollOp op;
  size_t count;
  ncclDataType_t type;
  int peer;  // p2p peer, -1 otherwise
  ncclComm_t comm;
};

void record(stallscope::Ticks t0, stallscope::Ticks t1, const CallArgs& a,
            bool join_only) noexcept {
  CommSlot* s = comm_slot(a.comm, true);
  if (s == nullptr) {
    static std::atomic<bool> said{false};
    say_once(said, "more than 1024 NCCL communicators: calls on later ones not recorded");
    return;
  }
  if (!join_only) say_interposed();
  stallscope::Collective c;
  c.name = op_name(a.op);
  c.op = a.op;
  const uint32_t size = pl::nccl_type_bytes(a.type);
  c.dtype = size == 0 ? 0xff : static_cast<uint8_t>(a.type);
  c.bytes = static_cast<uint64_t>(a.count) * size;
  const uint32_t gen = s->generation.load(std::memory_order_relaxed);
  const uint64_t shared = s->shared_id.load(std::memory_order_acquire);
  c.comm_id = shared != 0 ? shared
                          : mix(reinterpret_cast<uintptr_t>(a.comm) + gen * 0x9e3779b97f4a7c15ull);
  c.seq = s->next_seq.fetch_add(1, std::memory_order_relaxed);
  c.peer = a.peer;
  c.enqueued = true;  // the call returns once the work is queued on the stream
  c.join_only = join_only;
  comm_facts(*s, a.comm, c);
  stallscope::record_collective(t0, t1, c);
}

// Times one call and records it if it succeeded (or was enqueued on a
// nonblocking communicator). The guard keeps the shim's own NCCL queries,
// and what NCCL does on this thread meanwhile, out of the trace.
// While stallscope's plugin records the collectives, the call is still
// recorded, flagged join-only: only its span holds the kernel's launch.
template <typename Fn>
ncclResult_t traced(const CallArgs& a, Fn call) {
  const pl::Guard guard;
  const bool on = guard.entered() && stallscope::enabled();
  const stallscope::Ticks t0 = on ? stallscope::ticks_now() : 0;
  const ncclResult_t r = call();
  if (!on || (r != pl::kNcclSuccess && r != pl::kNcclInProgress)) return r;
  const stallscope::Ticks t1 = stallscope::ticks_now();
  const int saved = errno;
  record(t0, t1, a, g_plugin.load(std::memory_order_relaxed));
  errno = saved;
  return r;
}

// A destroyed communicator's handle may come back for a new one.
ncclResult_t forgetting(ncclComm_t comm, ncclResult_t r) noexcept {
  if (r != pl::kNcclSuccess) return r;
  if (CommSlot* s = comm_slot(comm, false)) {
    s->nranks.store(0, std::memory_order_relaxed);
    s->next_seq.store(0, std::memory_order_relaxed);
    s->shared_id.store(0, std::memory_order_relaxed);
    s->splits.store(0, std::memory_order_relaxed);
    s->generation.fetch_add(1, std::memory_order_relaxed);
  }
  return r;
}

// FNV-1a over the unique id's bytes, then mixed; never 0.
uint64_t id_of(const ncclUniqueId& u) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : u.internal) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return mix(h) | 1;
}

// A communicator just created (or being created, nonblocking) with the id
// every rank computes for it: a fresh slot state, whatever used the handle
// before.
ncclResult_t created(ncclComm_t* comm, uint64_t shared, ncclResult_t r) noexcept {
  if ((r != pl::kNcclSuccess && r != pl::kNcclInProgress) || comm == nullptr || *comm == nullptr)
    return r;
  if (CommSlot* s = comm_slot(*comm, true)) {
    s->nranks.store(0, std::memory_order_relaxed);
    s->next_seq.store(0, std::memory_order_relaxed);
    s->splits.store(0, std::memory_order_relaxed);
    s->shared_id.store(shared, std::memory_order_release);
  }
  return r;
}

}  // namespace

#define EXPORT STALLSCOPE_SHIM_EXPORT

// Called by libstallscope_cuda.so's NCCL profiler plugin when NCCL
// initializes it (the plugin finds it with dlsym(RTLD_DEFAULT, …)).
EXPORT void stallscope_preload_nccl_plugin_v1(int version) noexcept {
  if (g_plugin.exchange(true)) return;
  char text[120];
  std::snprintf(text, sizeof text,
                "NCCL profiler plugin v%d active: interposed NCCL calls kept only to tie NCCL "
                "kernels to their calls",
                version);
  pl::shim_note(text);
}

EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream) {
  return traced({CollOp::kAllReduce, count, type, -1, comm}, [&] {
    return real_ncclAllReduce.get()(sendbuff, recvbuff, count, type, op, comm, stream);
  });
}
EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  return traced({CollOp::kBroadcast, count, type, -1, comm}, [&] {
    return real_ncclBroadcast.get()(sendbuff, recvbuff, count, type, root, comm, stream);
  });
}
EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                               cudaStream_t stream) {
  return traced({CollOp::kReduce, count, type, -1, comm}, [&] {
    return real_ncclReduce.get()(sendbuff, recvbuff, count, type, op, root, comm, stream);
  });
}
EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) {
  return traced({CollOp::kAllGather, sendcount, type, -1, comm}, [&] {
    return real_ncclAllGather.get()(sendbuff, recvbuff, sendcount, type, comm, stream);
  });
}
EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  return traced({CollOp::kReduceScatter, recvcount, type, -1, comm}, [&] {
    return real_ncclReduceScatter.get()(sendbuff, recvbuff, recvcount, type, op, comm, stream);
  });
}
EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t type, int peer,
                             ncclComm_t comm, cudaStream_t stream) {
  return traced({CollOp::kSend, count, type, peer, comm},
                [&] { return real_ncclSend.get()(sendbuff, count, type, peer, comm, stream); });
}
EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t type, int peer,
                             ncclComm_t comm, cudaStream_t stream) {
  return traced({CollOp::kRecv, count, type, peer, comm},
                [&] { return real_ncclRecv.get()(recvbuff, count, type, peer, comm, stream); });
}
EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  const uint64_t shared = id_of(id);
  return created(comm, shared, real_ncclCommInitRank.get()(comm, nranks, id, rank));
}
EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig* config) {
  const uint64_t shared = id_of(id);
  return created(comm, shared, real_ncclCommInitRankConfig.get()(comm, nranks, id, rank, config));
}
EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                  ncclConfig* config) {
  // Every rank of the parent calls this, in the same order: the parent's
  // id, its split count and the color name the new communicator alike.
  uint64_t shared = 0;
  if (CommSlot* p = comm_slot(comm, false)) {
    const uint64_t parent = p->shared_id.load(std::memory_order_acquire);
    const uint32_t nth = p->splits.fetch_add(1, std::memory_order_relaxed);
    const uint64_t c = static_cast<uint32_t>(color);
    if (parent != 0) shared = mix(parent ^ mix(0x5b117ull + nth) ^ (c << 32)) | 1;
  }
  const ncclResult_t r = real_ncclCommSplit.get()(comm, color, key, newcomm, config);
  return created(newcomm, shared, r);
}
EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return forgetting(comm, real_ncclCommDestroy.get()(comm));
}
EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return forgetting(comm, real_ncclCommAbort.get()(comm));
}
