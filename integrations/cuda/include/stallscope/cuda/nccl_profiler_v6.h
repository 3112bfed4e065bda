/* NCCL profiler plugin ABI, version 6 (NCCL 2.28): version 5 plus
 * copy-engine collective events and kernel steps. See
 * nccl_profiler_common.h. */
#ifndef STALLSCOPE_CUDA_NCCL_PROFILER_V6_H
#define STALLSCOPE_CUDA_NCCL_PROFILER_V6_H

#include "stallscope/cuda/nccl_profiler_v5.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    STALLSCOPE_NCCL_V5_DESCR_MEMBERS
    struct {
      uint8_t channelId;
      uint8_t isSend;
      uint8_t peer;
      uint32_t step;
      uint32_t size;
      uint64_t startTs;
      uint64_t readyTs;
    } kernelStep;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                       const char* commName, int nNodes, int nranks, int rank,
                       ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

#ifdef __cplusplus
}
#endif

#endif
