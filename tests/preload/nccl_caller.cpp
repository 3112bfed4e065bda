// A program linked against libnccl.so.2 (the test fake, through its soname)
// making known calls: on communicator A (rank 2 of 4) 10 all-reduces of 1M
// floats, an all-gather of 64 int64, a reduce-scatter of 32 doubles, a
// reduce of 16 int32; on communicator B (rank 1 of 2) 3 broadcasts of 256
// bytes and, in one group, a send and a recv of 1000 halves to peer 0; then
// an all-reduce on a null communicator, which fails; after destroying both,
// one all-reduce of one float on communicator C (rank 5 of 8), and one on D,
// split from C (rank 0 of 4). Each communicator is made from its own unique
// id (A 1, B 2, C 3), as every rank of a job would; B with
// ncclCommInitRankConfig, the others with ncclCommInitRank. Prints the version,
// the sum of the successful calls' results, the failing call's result and
// errno after the last successful call and after the failing one, and
// whether C got A's address.
#include <cerrno>
#include <cstddef>
#include <cstdio>

extern "C" {
struct ncclComm;
struct ncclUniqueId {
  char internal[128];
};
int ncclGetVersion(int* version);
int ncclCommInitRank(ncclComm** comm, int nranks, ncclUniqueId id, int rank);
int ncclCommInitRankConfig(ncclComm** comm, int nranks, ncclUniqueId id, int rank, void* config);
int ncclCommDestroy(ncclComm* comm);
int ncclCommSplit(ncclComm* comm, int color, int key, ncclComm** newcomm, void* config);
int ncclGroupStart();
int ncclGroupEnd();
int ncclAllReduce(const void*, void*, size_t, int, int, ncclComm*, void*);
int ncclBroadcast(const void*, void*, size_t, int, int, ncclComm*, void*);
int ncclReduce(const void*, void*, size_t, int, int, int, ncclComm*, void*);
int ncclAllGather(const void*, void*, size_t, int, ncclComm*, void*);
int ncclReduceScatter(const void*, void*, size_t, int, int, ncclComm*, void*);
int ncclSend(const void*, size_t, int, int, ncclComm*, void*);
int ncclRecv(void*, size_t, int, int, ncclComm*, void*);
}

namespace {
// ncclDataType_t and ncclRedOp_t values of nccl.h.
enum { kInt32 = 2, kInt64 = 4, kUint8 = 1, kFloat16 = 6, kFloat32 = 7, kFloat64 = 8 };
enum { kSum = 0 };
}  // namespace

int main() {
  int version = 0;
  ncclGetVersion(&version);
  ncclUniqueId id_a{}, id_b{}, id_c{};
  id_a.internal[0] = 1;
  id_b.internal[0] = 2;
  id_c.internal[0] = 3;
  ncclComm* a = nullptr;
  ncclComm* b = nullptr;
  int ok = ncclCommInitRank(&a, 4, id_a, 2) + ncclCommInitRankConfig(&b, 2, id_b, 1, nullptr);
  char buf[16];
  void* s = buf;
  for (int i = 0; i < 10; ++i) ok += ncclAllReduce(s, buf, 1 << 20, kFloat32, kSum, a, nullptr);
  for (int i = 0; i < 3; ++i) ok += ncclBroadcast(s, buf, 256, kUint8, 0, b, nullptr);
  ok += ncclGroupStart();
  ok += ncclSend(s, 1000, kFloat16, 0, b, nullptr);
  ok += ncclRecv(buf, 1000, kFloat16, 0, b, nullptr);
  ok += ncclGroupEnd();
  ok += ncclAllGather(s, buf, 64, kInt64, a, nullptr);
  ok += ncclReduceScatter(s, buf, 32, kFloat64, kSum, a, nullptr);
  errno = 0;
  ok += ncclReduce(s, buf, 16, kInt32, kSum, 0, a, nullptr);
  const int errno_ok = errno;
  errno = 0;
  const int failed = ncclAllReduce(s, buf, 1 << 20, kFloat32, kSum, nullptr, nullptr);
  const int err = errno;
  ok += ncclCommDestroy(b);
  ok += ncclCommDestroy(a);  // last freed: first reused
  // A new communicator at A's old address (the fake reuses the last freed).
  ncclComm* c = nullptr;
  ok += ncclCommInitRank(&c, 8, id_c, 5);
  const int reused = c == a ? 1 : 0;
  ok += ncclAllReduce(s, buf, 1, kFloat32, kSum, c, nullptr);
  ncclComm* d = nullptr;
  ok += ncclCommSplit(c, 0, 0, &d, nullptr);
  ok += ncclAllReduce(s, buf, 2, kFloat32, kSum, d, nullptr);
  ok += ncclCommDestroy(d);
  ok += ncclCommDestroy(c);
  std::printf("version %d\nok_results %d\nfailed_result %d\nerrno %d %d\nreused %d\n", version, ok,
              failed, errno_ok, err, reused);
  return ok == 0 && failed != 0 ? 0 : 1;
}
