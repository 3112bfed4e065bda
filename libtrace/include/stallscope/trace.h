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
  STALLSCOPE_MARK = 18,
  STALLSCOPE_SAMPLE = 19,
  STALLSCOPE_LOADER_CONFIG = 20,
  STALLSCOPE_BATCH_HANDOFF = 21,
  STALLSCOPE_CHANNEL_HANDOFF = 22,
  STALLSCOPE_STACK_SAMPLE = 23
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
/* A step that began at ts (ticks, at most now), marked once it is known to
 * be one: the PyTorch hooks mark a step when its first batch came back,
 * from when the trainer began waiting for it. Step hooks hear of it now. */
STALLSCOPE_API void stallscope_step_begin_at(uint64_t index, uint64_t ts);
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

/* ---- The input pipeline seen from inside, and stack samples (trace
 * format 1.1; docs/trace-format.md). A loader is named by loader_id, a
 * process-unique id of the loader object; generation says which iter() of
 * it (a persistent-worker reset starts the next); batch_index counts the
 * batches of a generation; worker -1 is the trainer's own process. Each
 * function returns 0, -EINVAL for a bad argument (end before start, an
 * enum value out of range), -ENOBUFS when the event was dropped (counted),
 * -ENODEV when not recording. Times are ticks (stallscope_clock_now). */

/* What a sample span covers (the values of format::SamplePart). */
enum stallscope_sample_part {
  STALLSCOPE_SAMPLE_GETITEM = 0,  /* one dataset[index]; count = 1 */
  STALLSCOPE_SAMPLE_NEXT = 1,     /* one next() of an iterable dataset (no index) */
  STALLSCOPE_SAMPLE_GETITEMS = 2, /* one __getitems__ call for count samples */
  STALLSCOPE_SAMPLE_FETCH = 3,    /* a worker's whole fetch of the batch */
  STALLSCOPE_SAMPLE_COLLATE = 4   /* the collate_fn over count samples */
};

/* The load of one dataset item from start to end, on the calling thread
 * (the worker that loaded it). sample_index is the dataset index (for
 * STALLSCOPE_SAMPLE_NEXT, the item's ordinal in the worker's stream). */
STALLSCOPE_API int stallscope_sample_record(uint64_t start, uint64_t end, uint64_t loader_id,
                                           uint32_t generation, uint64_t batch_index,
                                           uint64_t sample_index, int32_t worker,
                                           uint32_t part, uint32_t count);

enum stallscope_mp_context {
  STALLSCOPE_MP_UNKNOWN = 0, STALLSCOPE_MP_FORK = 1, STALLSCOPE_MP_SPAWN = 2,
  STALLSCOPE_MP_FORKSERVER = 3
};
enum stallscope_dataset_kind {
  STALLSCOPE_DATASET_UNKNOWN = 0, STALLSCOPE_DATASET_MAP = 1, STALLSCOPE_DATASET_ITERABLE = 2
};
enum stallscope_pin_memory {
  STALLSCOPE_PIN_OFF = 0,      /* pin_memory=False */
  STALLSCOPE_PIN_ON = 1,       /* pin_memory=True and a pin-memory thread runs */
  STALLSCOPE_PIN_INACTIVE = 2  /* pin_memory=True, turned off (no accelerator) */
};
#define STALLSCOPE_LOADER_GETITEMS 1u   /* the dataset has __getitems__ */
#define STALLSCOPE_LOADER_OVERRIDDEN 2u /* a setting came from `stallscope run --set` */

/* A loader's configuration at iterator creation. Versioned: set `size` to
 * sizeof(struct stallscope_loader_config); fields a later version appends
 * read as 0 from a shorter struct, and this library ignores what it does
 * not know past its own size. Zero-initialise, then fill what is known. */
struct stallscope_loader_config {
  uint32_t size;                /* sizeof(struct stallscope_loader_config) */
  uint32_t generation;
  uint64_t ts;                  /* ticks of the iterator's creation; 0 = now */
  uint64_t loader_id;
  uint64_t dataset_len;         /* 0 = unknown */
  uint32_t num_workers;
  uint32_t prefetch_factor;     /* 0 = not applicable */
  uint32_t batch_size;          /* 0 = None or unknown */
  uint32_t timeout_ms;          /* 0 = none */
  stallscope_name_t dataset_name;  /* the dataset's class */
  stallscope_name_t collate_name;  /* the collate_fn */
  stallscope_name_t sampler_name;
  stallscope_name_t batch_sampler_name;
  stallscope_name_t site_name;  /* where it was constructed: "train.py:42" */
  uint8_t pin_memory;           /* enum stallscope_pin_memory */
  uint8_t persistent_workers;   /* 0/1 */
  uint8_t drop_last;            /* 0/1 */
  uint8_t in_order;             /* 0/1 */
  uint8_t mp_context;           /* enum stallscope_mp_context */
  uint8_t dataset_kind;         /* enum stallscope_dataset_kind */
  uint8_t flags;                /* STALLSCOPE_LOADER_* */
  uint8_t reserved;
  uint32_t reserved2;
};
/* The size of the first version; smaller structs are refused (-EINVAL). */
#define STALLSCOPE_LOADER_CONFIG_SIZE_V1 80u
STALLSCOPE_API int stallscope_loader_config_record(const struct stallscope_loader_config* c);

/* A batch from a worker's put (`put`, ticks taken by the worker) to the
 * trainer's receive (`received`), recorded by the trainer. `requested`:
 * when the trainer asked for this batch, 0 = unknown. */
STALLSCOPE_API int stallscope_batch_handoff_record(uint64_t put, uint64_t received,
                                                  uint64_t requested, uint64_t loader_id,
                                                  uint32_t generation, uint64_t batch_index,
                                                  int32_t worker, uint32_t worker_pid);

enum stallscope_channel_type {
  STALLSCOPE_CHANNEL_UNKNOWN = 0, STALLSCOPE_CHANNEL_PIPE = 1, STALLSCOPE_CHANNEL_MP_QUEUE = 2,
  STALLSCOPE_CHANNEL_SOCKET = 3, STALLSCOPE_CHANNEL_USER = 4, STALLSCOPE_CHANNEL_EVENTFD = 5,
  STALLSCOPE_CHANNEL_CONDVAR = 6, STALLSCOPE_CHANNEL_SEMAPHORE = 7
};

/* One object through a channel stallscope did not build (a pipe, a
 * multiprocessing queue, a C++ queue), from its put to its get, recorded
 * by the consumer. `requested`: when the get began, 0 = unknown; pids and
 * tids 0 = unknown; object_id and bytes 0 = none/unknown; parts: reads or
 * writes that carried the object, 0 = unknown. */
STALLSCOPE_API int stallscope_channel_handoff_record(
    uint64_t put, uint64_t got, uint64_t requested, uint64_t channel_id, uint32_t channel_type,
    uint32_t producer_pid, uint32_t producer_tid, uint32_t consumer_pid, uint32_t consumer_tid,
    uint64_t object_id, uint64_t bytes, uint32_t parts);

enum stallscope_on_cpu {
  STALLSCOPE_CPU_UNKNOWN = 0, STALLSCOPE_CPU_RUNNING = 1, STALLSCOPE_CPU_BLOCKED = 2
};
#define STALLSCOPE_STACK_LATE 1u      /* taken late (the GIL was held): the interval is real */
#define STALLSCOPE_STACK_TRUNCATED 2u /* more frames than recorded: outermost dropped */
#define STALLSCOPE_STACK_NATIVE 4u    /* native frames, not Python's */

/* One stack sample of thread `tid` (0 = the calling thread) at `ts`:
 * frames are interned names, innermost first (frames may be NULL when
 * n_frames is 0; past 16374 the outermost are dropped and
 * STALLSCOPE_STACK_TRUNCATED set). interval_ns: the sampling interval the
 * sample stands for; cost_ns: what taking it cost; flags: STALLSCOPE_STACK_*.
 * Written on a track of the sampled thread. */
STALLSCOPE_API int stallscope_stack_sample_record(uint64_t ts, uint32_t tid, uint64_t interval_ns,
                                                 uint32_t cost_ns, uint32_t on_cpu,
                                                 uint32_t flags, const stallscope_name_t* frames,
                                                 uint32_t n_frames);

#ifdef __cplusplus
}
#endif

#endif /* STALLSCOPE_TRACE_H */
