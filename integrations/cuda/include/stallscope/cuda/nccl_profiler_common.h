/* NCCL profiler plugin ABI: the types every version shares.
 *
 * The CUDA toolkit ships nccl.h but not the plugin headers, so stallscope
 * declares the ABI itself, one file per interface version, after NCCL's
 * public plugin documentation (ext-profiler/ in the NCCL sources). NCCL
 * dlopens the library named by NCCL_PROFILER_PLUGIN and looks up
 * `ncclProfiler_v<N>` from the newest version it knows downwards. Only the
 * fields stallscope reads need to be right, but each struct is declared whole
 * so that the layout matches. */
#ifndef STALLSCOPE_CUDA_NCCL_PROFILER_COMMON_H
#define STALLSCOPE_CUDA_NCCL_PROFILER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ncclResult_t comes from nccl.h where it is included; the plugin ABI only
 * needs it as an int-sized enum. */
#ifndef NCCL_H_
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
} ncclResult_t;
#endif

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
                                  const char* file, int line, const char* fmt, ...);

typedef pid_t ncclPid_t;

/* Event types (bits of the activation mask and of a descriptor's type). */
enum {
  ncclProfileGroup = (1 << 0),
  ncclProfileColl = (1 << 1),
  ncclProfileP2p = (1 << 2),
  ncclProfileProxyOp = (1 << 3),
  ncclProfileProxyStep = (1 << 4),
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),
  ncclProfileNetPlugin = (1 << 7),
  ncclProfileGroupApi = (1 << 8),   /* v5 */
  ncclProfileCollApi = (1 << 9),    /* v5 */
  ncclProfileP2pApi = (1 << 10),    /* v5 */
  ncclProfileKernelLaunch = (1 << 11), /* v5 */
  ncclProfileCeColl = (1 << 12),    /* v6 */
  ncclProfileCeSync = (1 << 13),    /* v6 */
  ncclProfileCeBatch = (1 << 14)    /* v6 */
};

/* Event state transitions (recordEventState); stallscope uses only the
 * kernel-channel stop, the rest are listed for completeness of the enum. */
typedef enum {
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24,
  ncclProfilerCeCollStart = 25,
  ncclProfilerCeCollComplete = 26,
  ncclProfilerCeSyncStart = 27,
  ncclProfilerCeSyncComplete = 28,
  ncclProfilerCeBatchStart = 29,
  ncclProfilerCeBatchComplete = 30
} ncclProfilerEventState_t;

#ifdef __cplusplus
}
#endif

#endif
