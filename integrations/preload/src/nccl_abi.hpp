// The slice of NCCL's C ABI (nccl.h) the shim interposes, declared here so
// the shim builds and loads without NCCL, and the element size of each
// ncclDataType_t. The size table repeats the one in
// integrations/cuda/src/nccl_math.cpp: that file lives in
// libstallscope_cuda's core, which is built only with the CUDA toolkit and
// which the shim does not link.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
struct ncclComm;
struct ncclConfig;  // ncclConfig_t: passed through, never read
struct CUstream_st;
// What ncclGetUniqueId returns on one rank and the launcher hands to every
// other: the same 128 bytes in each rank of a communicator.
typedef struct {
  char internal[128];
} ncclUniqueId;
typedef struct ncclComm* ncclComm_t;
typedef struct CUstream_st* cudaStream_t;
// Enums in nccl.h, int-sized in its C ABI.
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig* config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig* config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
// Looked up, never wrapped.
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclGetVersion(int* version);
}  // extern "C"

namespace stallscope::preload {

inline constexpr ncclResult_t kNcclSuccess = 0;
inline constexpr ncclResult_t kNcclSystemError = 2;
inline constexpr ncclResult_t kNcclInProgress = 7;  // nonblocking communicator: enqueued

// Bytes of one element of ncclDataType_t `type` (ncclInt8 = 0 …
// ncclFloat8e5m2 = 11); 0 when unknown.
inline uint32_t nccl_type_bytes(ncclDataType_t type) noexcept {
  constexpr uint8_t kBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return type >= 0 && type < static_cast<int>(sizeof kBytes) ? kBytes[type] : 0;
}

}  // namespace stallscope::preload
