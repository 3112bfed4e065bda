/* stallscope recorder — C API.
 *
 * Records what a training process does into one trace file per process in
 * the run directory (STALLSCOPE_OUT, or derived from the job; see
 * docs/configuration.md). Recording starts at the first call (or at
 * stallscope_init) and the file is completed at exit, SIGTERM or SIGINT.
 *
 * Quickstart:
 *
 *   #include <stallscope/trace.h>
 *   for (uint64_t i = 0; i < steps; ++i) {
 *     stallscope_step_begin(i);
 *     uint64_t t0 = stallscope_clock_now();
 *     next_batch();
 *     stallscope_data_wait_record(t0, stallscope_clock_now(), batch_id);
 *     train();
 *     stallscope_step_end(i);
 *   }
 *
 * Every function is thread-safe, noexcept and never blocks: when the
 * per-thread buffer is full the event is dropped and counted. Functions that
 * can fail return 0 or a negative errno. Timestamps are stallscope ticks
 * (stallscope_clock_now); readers convert them to nanoseconds.
 */
#ifndef STALLSCOPE_TRACE_H
#define STALLSCOPE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define STALLSCOPE_API
#else
#define STALLSCOPE_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of this header; bumped on incompatible changes. */
#define STALLSCOPE_ABI_VERSION 1

typedef uint32_t stallscope_name_t; /* interned string id; 0 = none */

/* Event kinds: the values of stallscope::format::Kind. */
enum stallscope_kind {
  STALLSCOPE_STEP = 1,
  STALLSCOPE_DATA_WAIT = 2,
  STALLSCOPE_STORAGE_READ = 3,
  STALLSCOPE_PREPROCESS = 4,
  STALLSCOPE_BATCH_READY = 5,
  STALLSCOPE_API_CALL = 6,
  STALLSCOPE_H2D = 7,
  STALLSCOPE_D2H = 8,
  STALLSCOPE_D2D = 9,
  STALLSCOPE_MEMSET = 10,
  STALLSCOPE_KERNEL = 11,
  STALLSCOPE_COLLECTIVE = 12,
  STALLSCOPE_SYNC = 13,
  STALLSCOPE_RANGE = 14,
  STALLSCOPE_COUNTER = 15,
  STALLSCOPE_MARK = 18
};

/* Starts the recorder now instead of at the first event. Returns 0, or a
 * negative errno when tracing could not start (the program is unaffected). */
STALLSCOPE_API int stallscope_init(void);
/* Flushes everything recorded so far to the file. Returns 0 or -errno. */
STALLSCOPE_API int stallscope_flush(void);
/* Flushes, writes the end marker and stops recording for good. */
STALLSCOPE_API void stallscope_shutdown(void);

/* Current timestamp in ticks. */
STALLSCOPE_API uint64_t stallscope_clock_now(void);
/* Interns a NUL-terminated UTF-8 name; the same name returns the same id.
 * Takes a lock: call once per name and keep the id. Returns 0 on failure. */
STALLSCOPE_API stallscope_name_t stallscope_name_intern(const char* name);
/* A process-unique correlation id (never 0). */
STALLSCOPE_API uint64_t stallscope_corr_next(void);
/* Names the calling thread's track (copied). */
STALLSCOPE_API void stallscope_thread_name_set(const char* name);

/* Capture switch (also driven by the run directory's control file).
 * Turning capture off writes a window-end record. */
STALLSCOPE_API void stallscope_capture_set(int on);
STALLSCOPE_API int stallscope_capture_enabled(void);
/* Registers fn to hear of capture switches (a source that buffers outside
 * the recorder, e.g. CUPTI, flushes on "off"): called with on = 0 before
 * capture stops, so what it flushes is still recorded, and with on = 1
 * after capture starts. At most 4 hooks; returns 0, or -ENOSPC / -EINVAL.
 * fn runs on the thread that switched capture (the flusher, for the
 * control file) and must not switch capture itself. */
STALLSCOPE_API int stallscope_capture_hook_add(void (*fn)(int on));

/* Step markers on the calling thread (one training iteration). */
STALLSCOPE_API void stallscope_step_begin(uint64_t index);
STALLSCOPE_API void stallscope_step_end(uint64_t index);
/* Registers fn to hear of step markers (a GPU source tags the CUDA calls a
 * step makes): called on the marking thread with begin = 1 after a step's
 * begin record, and begin = 0 before its end record, whether capture is on
 * or not. At most 4 hooks; returns 0, or -ENOSPC / -EINVAL. fn must be
 * cheap and must not mark steps itself. */
STALLSCOPE_API int stallscope_step_hook_add(void (*fn)(uint64_t index, int begin));

/* A user range on the calling thread; pops match pushes on the same thread. */
STALLSCOPE_API void stallscope_range_push(const char* name);
STALLSCOPE_API void stallscope_range_pop(void);

/* The trainer waited for its next batch from start to end (ticks). */
STALLSCOPE_API void stallscope_data_wait_record(uint64_t start, uint64_t end,
                                               uint64_t batch_id);
/* A sampled value; subject is a tid/pid the value refers to, or 0. */
STALLSCOPE_API void stallscope_counter_record(stallscope_name_t name, double value,
                                             uint64_t subject);
/* An instant note, e.g. "checkpoint". */
STALLSCOPE_API void stallscope_mark(const char* text);

/* Any event with its extension records laid out as in
 * stallscope/format.hpp (ext may be NULL). start/end are ticks; for an
 * instant pass end == start. Returns 0, -EINVAL for a malformed extension,
 * -ENOBUFS when the event was dropped (counted), -ENODEV when not recording. */
STALLSCOPE_API int stallscope_event_record(uint32_t kind, stallscope_name_t name,
                                          uint64_t start, uint64_t end, uint64_t corr,
                                          const void* ext, uint32_t ext_bytes);

#ifdef __cplusplus
}
#endif

#endif /* STALLSCOPE_TRACE_H */
