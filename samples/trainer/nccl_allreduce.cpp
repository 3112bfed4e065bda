#include "nccl_allreduce.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace trainer {

namespace {

// The few NCCL declarations used (nccl.h: ncclUniqueId is 128 opaque bytes,
// ncclFloat32 = 7, ncclSum = 0); the library comes from dlopen.
struct UniqueId {
  char bytes[128];
};
using NcclComm = void*;
constexpr int kFloat32 = 7, kSum = 0;

struct Api {
  int (*get_unique_id)(UniqueId*);
  int (*comm_init_rank)(NcclComm*, int, UniqueId, int);
  int (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, cudaStream_t);
  int (*comm_destroy)(NcclComm);
  const char* (*error_string)(int);
  int (*get_version)(int*);
};

bool load(void* lib, Api* a) {
  auto sym = [lib](const char* n) { return dlsym(lib, n); };
  a->get_unique_id = reinterpret_cast<decltype(a->get_unique_id)>(sym("ncclGetUniqueId"));
  a->comm_init_rank = reinterpret_cast<decltype(a->comm_init_rank)>(sym("ncclCommInitRank"));
  a->all_reduce = reinterpret_cast<decltype(a->all_reduce)>(sym("ncclAllReduce"));
  a->comm_destroy = reinterpret_cast<decltype(a->comm_destroy)>(sym("ncclCommDestroy"));
  a->error_string = reinterpret_cast<decltype(a->error_string)>(sym("ncclGetErrorString"));
  a->get_version = reinterpret_cast<decltype(a->get_version)>(sym("ncclGetVersion"));
  return a->get_unique_id && a->comm_init_rank && a->all_reduce && a->comm_destroy &&
         a->error_string;
}

class Nccl final : public NcclAllreduce {
 public:
  Nccl(const Api& api, NcclComm comm) : api_(api), comm_(comm) {}
  ~Nccl() override { api_.comm_destroy(comm_); }
  int enqueue(void* buf, size_t floats, cudaStream_t stream) override {
    return api_.all_reduce(buf, buf, floats, kFloat32, kSum, comm_, stream);
  }
  std::string version() const override {
    int v = 0;
    if (api_.get_version == nullptr || api_.get_version(&v) != 0) return "?";
    return std::to_string(v);
  }

 private:
  Api api_;
  NcclComm comm_;
};

}  // namespace

std::unique_ptr<NcclAllreduce> open_nccl_allreduce(Comm& comm, std::string* why) {
  const char* path = std::getenv("STALLSCOPE_TRAINER_NCCL_LIB");
  void* lib = dlopen(path ? path : "libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  Api api{};
  // Every rank takes part in the broadcast, even one without NCCL, so that
  // no rank waits in it forever; rank 0 sends an empty id when it cannot
  // make one. (Ranks are assumed to see the same libnccl: one that lacks it
  // while rank 0 has it would leave the others in ncclCommInitRank.)
  const bool usable = lib != nullptr && load(lib, &api);
  UniqueId id{};
  if (comm.rank() == 0 && usable && api.get_unique_id(&id) != 0) std::memset(&id, 0, sizeof id);
  if (!comm.broadcast(&id, sizeof id)) return *why = "the Comm cannot broadcast the NCCL id", nullptr;
  static const UniqueId kEmpty{};
  if (!usable)
    return *why = std::string("NCCL not loadable: ") + (lib ? "symbols missing" : dlerror()), nullptr;
  if (std::memcmp(&id, &kEmpty, sizeof id) == 0)
    return *why = "rank 0 could not create an NCCL id", nullptr;
  NcclComm c = nullptr;
  if (const int rc = api.comm_init_rank(&c, comm.size(), id, comm.rank()); rc != 0)
    return *why = std::string("ncclCommInitRank: ") + api.error_string(rc), nullptr;
  return std::make_unique<Nccl>(api, c);
}

}  // namespace trainer
