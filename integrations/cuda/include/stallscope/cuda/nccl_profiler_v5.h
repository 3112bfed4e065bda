/* NCCL profiler plugin ABI, version 5 (NCCL 2.27): adds API-level events
 * (group, collective and p2p API calls, kernel launches), a 64-bit type and
 * the communicator id first in init. See nccl_profiler_common.h. */
#ifndef STALLSCOPE_CUDA_NCCL_PROFILER_V5_H
#define STALLSCOPE_CUDA_NCCL_PROFILER_V5_H

#include "stallscope/cuda/nccl_profiler_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STALLSCOPE_NCCL_V5_DESCR_MEMBERS                                        \
  struct {                                                                      \
    bool graphCaptured;                                                         \
    int groupDepth;                                                             \
  } groupApi;                                                                   \
  struct {                                                                      \
    const char* func;                                                           \
    size_t count;                                                               \
    const char* datatype;                                                       \
    int root;                                                                   \
    void* stream;                                                               \
    bool graphCaptured;                                                         \
  } collApi;                                                                    \
  struct {                                                                      \
    const char* func;                                                           \
    size_t count;                                                               \
    const char* datatype;                                                       \
    void* stream;                                                               \
    bool graphCaptured;                                                         \
  } p2pApi;                                                                     \
  struct {                                                                      \
    void* stream;                                                               \
  } kernelLaunch;                                                               \
  struct {                                                                      \
    uint64_t seqNumber;                                                         \
    const char* func;                                                           \
    void const* sendBuff;                                                       \
    void* recvBuff;                                                             \
    size_t count;                                                               \
    int root;                                                                   \
    const char* datatype;                                                       \
    uint8_t nChannels;                                                          \
    uint8_t nWarps;                                                             \
    const char* algo;                                                           \
    const char* proto;                                                          \
    void* parentGroup;                                                          \
  } coll;                                                                       \
  struct {                                                                      \
    const char* func;                                                           \
    void* buff;                                                                 \
    const char* datatype;                                                       \
    size_t count;                                                               \
    int peer;                                                                   \
    uint8_t nChannels;                                                          \
    void* parentGroup;                                                          \
  } p2p;                                                                        \
  struct {                                                                      \
    ncclPid_t pid;                                                              \
    uint8_t channelId;                                                          \
    int peer;                                                                   \
    int nSteps;                                                                 \
    int chunkSize;                                                              \
    int isSend;                                                                 \
  } proxyOp;                                                                    \
  struct {                                                                      \
    int step;                                                                   \
  } proxyStep;                                                                  \
  struct {                                                                      \
    uint8_t channelId;                                                          \
    uint64_t pTimer;                                                            \
  } kernelCh;                                                                   \
  struct {                                                                      \
    int64_t id;                                                                 \
    void* data;                                                                 \
  } netPlugin;

typedef struct {
  uint64_t type;    /* one ncclProfile* bit */
  void* parentObj;  /* the parent event's handle */
  int rank;
  union {
    STALLSCOPE_NCCL_V5_DESCR_MEMBERS
  };
} ncclProfilerEventDescr_v5_t;

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
  struct { uint64_t pTimer; } kernelStep;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask,
                       const char* commName, int nNodes, int nranks, int rank,
                       ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

#ifdef __cplusplus
}
#endif

#endif
