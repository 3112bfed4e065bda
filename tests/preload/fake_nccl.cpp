// A stand-in libnccl.so.2 for the shim's NCCL tests: the entry points a
// program calls, each sleeping 200 µs, setting errno to ENOENT (as a real
// library's internal probes may) and returning ncclSuccess — or
// ncclInvalidArgument for a null communicator.
//
//   FAKE_NCCL_VERSION   what ncclGetVersion reports (default 21805, 2.18.5)
//   NCCL_PROFILER_PLUGIN  as NCCL >= 2.26 does, when the version is 2.26 or
//                       later: dlopen it RTLD_LOCAL at communicator init and
//                       call its ncclProfiler_v6 init
//   FAKE_NCCL_ANNOUNCE  1: at communicator init, call the preload shim's
//                       stallscope_preload_nccl_plugin_v1 as the plugin would
#include <dlfcn.h>
#include <time.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

struct ncclComm {
  int nranks;
  int rank;
  void* profiler_context;
};
struct ncclUniqueId {
  char internal[128];
};
using Comm = ncclComm;

namespace {

enum : int { kSuccess = 0, kInvalidArgument = 4 };

// The prefix of NCCL's ncclProfiler_v6_t this fake needs: name and init.
struct ProfilerV6 {
  const char* name;
  int (*init)(void** context, uint64_t comm_id, int* mask, const char* comm_name, int nnodes,
              int nranks, int rank, void* logfn);
};

int pause_then(int result) {
  const timespec ts{0, 200000};
  ::nanosleep(&ts, nullptr);
  errno = ENOENT;
  return result;
}

int work(const Comm* comm) { return pause_then(comm == nullptr ? kInvalidArgument : kSuccess); }

}  // namespace

FAKE_EXPORT int ncclGetVersion(int* version) {
  const char* v = std::getenv("FAKE_NCCL_VERSION");
  *version = v != nullptr ? std::atoi(v) : 21805;
  return kSuccess;
}

namespace {

void init_profiler(Comm* c) {
  if (const char* a = std::getenv("FAKE_NCCL_ANNOUNCE"); a != nullptr && a[0] == '1') {
    using Tell = void (*)(int);
    if (void* f = ::dlsym(RTLD_DEFAULT, "stallscope_preload_nccl_plugin_v1"))
      reinterpret_cast<Tell>(f)(6);
  }
  int version = 0;
  ncclGetVersion(&version);
  const char* path = std::getenv("NCCL_PROFILER_PLUGIN");
  if (path == nullptr || version < 22600) return;
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto* p = lib != nullptr ? static_cast<ProfilerV6*>(::dlsym(lib, "ncclProfiler_v6")) : nullptr;
  int mask = 0;
  if (p != nullptr)
    p->init(&c->profiler_context, 0x5eed, &mask, "fake", 1, c->nranks, c->rank, nullptr);
}

}  // namespace

// A destroyed communicator's address is the next one handed out, as a
// real allocator often does: the shim must not take the new communicator
// for the old one. (Kept here rather than left to malloc, whose reuse
// depends on what other threads allocate and free.)
static Comm* g_freed = nullptr;

// Both entry points create through this, not through each other: a call
// between exported functions would reach the shim's wrapper a second time.
static int init_rank(Comm** comm, int nranks, int rank) {
  Comm* c = g_freed != nullptr ? g_freed : new Comm;
  g_freed = nullptr;
  *c = Comm{nranks, rank, nullptr};
  *comm = c;
  init_profiler(*comm);
  return kSuccess;
}

FAKE_EXPORT int ncclCommInitRank(Comm** comm, int nranks, ncclUniqueId, int rank) {
  return init_rank(comm, nranks, rank);
}
FAKE_EXPORT int ncclCommInitRankConfig(Comm** comm, int nranks, ncclUniqueId, int rank, void*) {
  return init_rank(comm, nranks, rank);
}
// Half the parent's ranks; the key is the rank in the new communicator.
FAKE_EXPORT int ncclCommSplit(Comm* comm, int color, int key, Comm** newcomm, void*) {
  if (comm == nullptr) return kInvalidArgument;
  *newcomm = color < 0 ? nullptr : new Comm{comm->nranks / 2, key, nullptr};
  return kSuccess;
}
FAKE_EXPORT int ncclCommDestroy(Comm* comm) {
  delete g_freed;
  g_freed = comm;
  return kSuccess;
}
FAKE_EXPORT int ncclCommAbort(Comm* comm) { return ncclCommDestroy(comm); }
FAKE_EXPORT int ncclCommCount(const Comm* comm, int* count) {
  if (comm == nullptr) return kInvalidArgument;
  *count = comm->nranks;
  return kSuccess;
}
FAKE_EXPORT int ncclCommUserRank(const Comm* comm, int* rank) {
  if (comm == nullptr) return kInvalidArgument;
  *rank = comm->rank;
  return kSuccess;
}
FAKE_EXPORT int ncclGroupStart() { return kSuccess; }
FAKE_EXPORT int ncclGroupEnd() { return pause_then(kSuccess); }

FAKE_EXPORT int ncclAllReduce(const void*, void*, size_t, int, int, Comm* comm, void*) {
  return work(comm);
}
FAKE_EXPORT int ncclBroadcast(const void*, void*, size_t, int, int, Comm* comm, void*) {
  return work(comm);
}
FAKE_EXPORT int ncclReduce(const void*, void*, size_t, int, int, int, Comm* comm, void*) {
  return work(comm);
}
FAKE_EXPORT int ncclAllGather(const void*, void*, size_t, int, Comm* comm, void*) {
  return work(comm);
}
FAKE_EXPORT int ncclReduceScatter(const void*, void*, size_t, int, int, Comm* comm, void*) {
  return work(comm);
}
FAKE_EXPORT int ncclSend(const void*, size_t, int, int, Comm* comm, void*) { return work(comm); }
FAKE_EXPORT int ncclRecv(void*, size_t, int, int, Comm* comm, void*) { return work(comm); }
