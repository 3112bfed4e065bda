/* libstallscope_cuda.so — the GPU side of stallscope, C ABI.
 *
 * Loaded by the LD_PRELOAD shim when CUDA initializes (the driver calls the
 * shim's InitializeInjection, which dlopens this library from its own
 * directory and calls stallscope_cuda_attach_v1), or linked by a program
 * that records itself. NCCL loads the same library as its profiler plugin
 * (NCCL_PROFILER_PLUGIN=<dir>/libstallscope_cuda.so; see
 * stallscope/cuda/nccl_profiler_v*.h).
 *
 *   if (stallscope_cuda_attach_v1() == 0) { ... train ...; }
 *   stallscope_cuda_flush_v1();   // at a step boundary or window end
 *
 * Every function is thread-safe and never throws; a fault degrades GPU
 * recording, never the program. Versioned names: a later incompatible
 * change adds _v2 beside _v1. */
#ifndef STALLSCOPE_CUDA_ATTACH_H
#define STALLSCOPE_CUDA_ATTACH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STALLSCOPE_CUDA_API __attribute__((visibility("default")))

/* Starts every GPU source (CUPTI activity). Returns 0 when recording, or a
 * negative errno: -ENODEV no CUDA driver, -ENOENT no CUPTI, -EBUSY CUPTI
 * already used by another tool, -ECANCELED STALLSCOPE_CUPTI=off. Each
 * failure prints one line on stderr ("stallscope: no CUDA driver: GPU
 * activity not recorded"). A second call returns the first call's result. */
STALLSCOPE_CUDA_API int stallscope_cuda_attach_v1(void);

/* Delivers the GPU records CUPTI holds now (steps, window end). 0 or -errno. */
STALLSCOPE_CUDA_API int stallscope_cuda_flush_v1(void);

/* Capture off: GPU activity kinds disabled and a flush; on: enabled again.
 * CUPTI is never finalized before the process exits. */
STALLSCOPE_CUDA_API void stallscope_cuda_capture_v1(int on);

/* A step marker (registered with stallscope_step_hook_add at attach): from
 * begin = 1 to begin = 0, the CUDA calls of the calling thread carry the
 * external correlation id index + 1 (kind CUSTOM2). STALLSCOPE_CUPTI_STEP_IDS=0
 * turns the tagging off. */
STALLSCOPE_CUDA_API void stallscope_cuda_step_v1(uint64_t index, int begin);

/* Called by the shim's CUPTI interposer before it forwards another
 * library's `api` call (cuptiSubscribe, cuptiSubscribe_v2,
 * cuptiActivityRegisterCallbacks, cuptiActivityRegisterTimestampCallback);
 * `who` names the calling library. With STALLSCOPE_CUPTI=yield stallscope
 * flushes, disables its kinds, unsubscribes, records "GPU activity handed to
 * <who>" and returns 1 (forward the call); with keep it returns 0 while it
 * records (refuse the call as CUPTI would: multiple subscribers). */
STALLSCOPE_CUDA_API int stallscope_cuda_cupti_request_v1(const char* api, const char* who);

#ifdef __cplusplus
}
#endif

#endif
