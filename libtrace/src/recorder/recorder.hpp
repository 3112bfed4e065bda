// The process's recorder: configuration, identity, registry, file and the
// background threads (flusher, sampler). One instance per process, created
// at the first event (or stallscope_init) and replaced in a fork child.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "recorder/config.hpp"
#include "recorder/file_writer.hpp"
#include "recorder/page_vec.hpp"
#include "recorder/progress.hpp"
#include "recorder/registry.hpp"
#include "recorder/signals.hpp"
#include "stallscope/trace.hpp"
#include "sys/cpu_sampler.hpp"
#include "stallscope/internal/run_identity.hpp"

namespace stallscope::detail {

enum class State : int { kIdle, kRunning, kFailed, kClosed };

struct SamplerSink;  // recorder.cpp

// The records of one track block of an events chunk.
struct TrackCounts {
  uint32_t track;
  RecordCounts counts;
};

struct Recorder {
  RecorderConfig cfg;
  Registry registry{64u << 20};
  FileWriter writer;
  std::string run_dir;
  std::string control_path;
  int pid = 0;
  std::atomic<State> state{State::kIdle};
  // Turned off after an exception (tracing_off_after_exception): capture
  // stays closed, whatever RUN/control or stallscope_capture_set() say.
  std::atomic<bool> off_for_good{false};

  // Flusher thread and its wake-up: a futex word that wake_flusher() bumps
  // (async-signal-safe, no lock: producers and signal handlers call it).
  pthread_t flusher{};
  bool flusher_started = false;  // set before the state becomes kRunning
  std::mutex flush_mu;      // one flush at a time
  std::atomic<uint32_t> wake_word{0};
  std::atomic<bool> stop{false};
  // Signal and _exit paths ask the flusher for a flush and wait for the
  // sequence to advance (nothing async-signal-unsafe in the handler).
  std::atomic<uint64_t> flush_requested{0};
  std::atomic<uint64_t> flush_done{0};
  std::atomic<bool> final_requested{false};

  std::unique_ptr<sys::CpuSampler> sampler;
  std::shared_ptr<SamplerSink> sampler_sink;  // its names and rings
  std::atomic<uint32_t> flusher_tid{0};  // published by the flusher as it starts
  std::atomic<bool> flusher_gone{false};  // it ended on an exception
  std::atomic<sys::CpuSampler*> live_sampler{nullptr};  // sampler, for the fork handler
  // Forked (without exec) from a process whose sampler ran: that sampler
  // reads this process's CPU time as a child's every tick. Here the
  // flusher takes the samples (`sample_in_flusher`), every
  // cfg.worker_sample_ms, without the machine-wide counters (idle CPUs,
  // cgroup: the parent has them); at the first step recorded here
  // (`steps_seen`) the sampler gets its own thread at cfg.sample_ms and all
  // its counters.
  bool sampled_by_parent = false;
  std::atomic<bool> sample_in_flusher{false};
  std::atomic<bool> steps_seen{false};
  ThreadBuffer* flusher_buffer = nullptr;  // the process track (capture marks)
  uint32_t process_track = 0;
  uint64_t disk_dropped = 0;
  // The flusher's working set (under flush_mu), in pages of its own: a
  // flush allocates nothing from the C heap, so glibc gives the flusher no
  // malloc arena (RELIABILITY.md 39).
  PageVec<uint64_t> track_written;       // events on disk, by track id
  PageVec<uint64_t> track_disk_dropped;  // by track id
  PageVec<uint8_t> flush_payload;
  PageVec<TrackCounts> flush_counts;
  PageVec<ThreadBuffer*> flush_buffers;
  PageVec<uint8_t> flush_table;
  // Stop mode, once the disk budget is spent: each track's buffer drops so
  // far, by track id. Later buffer drops are counted as disk drops: those
  // events could not have reached the file, whatever the buffer size.
  std::vector<uint64_t> buffer_drops_at_budget;
  std::vector<std::pair<std::string, std::string>> pending_attachments;
  std::mutex attach_mu;
  std::mutex internal_mu;   // writers of the process track (rare)
  int64_t control_mtime_ns = -1;
  bool control_refused = false;  // RUN/control is not a regular file (said once)
  ProgressState progress;  // flusher only (STALLSCOPE_PROGRESS)
};

// The current recorder (never null after first use; leaked on purpose so
// that exit-time and thread-exit paths never see a destroyed object).
Recorder& recorder();
// Starts recording if not started yet; false if tracing is off or failed.
bool ensure_started();
// Returns once a start in progress (on another thread) has finished: state
// set, the first capture window opened. The flusher waits for it.
void wait_until_started();
// Registers the calling thread; returns its buffer or nullptr. `bytes`:
// its buffer's size (0: STALLSCOPE_THREAD_BUFFER_KB); a thread that records
// little (the sampler) asks for less, since every page is touched up front.
ThreadBuffer* register_current_thread(size_t bytes = 0);
// Writes a record on the recorder's own process track, even while capture
// is off (capture marks, notes).
void emit_internal(const format::CoreRecord& core);
// emit() with the extension gathered from pieces (batch_ready id lists).
bool emit_pieces(const format::CoreRecord& core, const ThreadBuffer::Piece* pieces,
                 size_t n) noexcept;
// emit_pieces() on a track of thread `tid` (as emit_for_thread()).
bool emit_pieces_for_thread(uint32_t tid, const format::CoreRecord& core,
                            const ThreadBuffer::Piece* pieces, size_t n) noexcept;
// The calling thread's OS thread id (cached after the first call).
uint32_t current_tid() noexcept;
// The calling thread's track id (0 before its first event).
uint32_t current_track() noexcept;
// Fork child: a fresh recorder that keeps the parent's interned names.
void replace_recorder_after_fork();
// Starts r.sampler's thread, every signal blocked in it; without a thread
// (a process or thread limit) the sampler stays off, with a note.
void start_sampler_thread(Recorder& r);
// An exception (an allocation failure, almost always) in the recorder's
// work for `where`: tracing turns off for good, with one note for the
// process. Never throws, never allocates before the note.
void tracing_off_after_exception(const char* where) noexcept;

// Flusher (flusher.cpp). Returns 0 or pthread_create's error (EAGAIN: a
// process or thread limit).
int start_flusher(Recorder& r);
// Whether the calling thread is r's flusher.
bool on_flusher_thread(const Recorder& r) noexcept;
// Wakes the flusher of this process's recorder now (from any thread, a
// signal handler included).
void wake_flusher() noexcept;
void flush_now(Recorder& r, bool final);
// From any context, including signal handlers: wait up to `timeout_ms`
// for the flusher to complete a (final) flush. Returns false on timeout.
bool request_flush_and_wait(bool final, int timeout_ms) noexcept;
// Final flush, End chunk, threads stopped (normal exit, shutdown).
void close_recorder();
// exec (RELIABILITY.md 14, 42): everything recorded so far written and the
// file completed (End chunk) while recording goes on into the buffers; a
// successful exec leaves the file complete. After a failed exec,
// unseal_after_exec() takes the End chunk back and flushing resumes in the
// same file: nothing recorded meanwhile is lost. False when not sealed.
bool seal_for_exec() noexcept;
void unseal_after_exec() noexcept;

// Blocks every signal on the calling thread while alive: threads created
// meanwhile start with all signals blocked, so a SIGTERM that arrives while
// they start is never delivered to a recorder thread (whose handler would
// wait for itself).
class SignalsBlocked {
 public:
  SignalsBlocked() noexcept;
  ~SignalsBlocked();
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// Lifecycle (lifecycle.cpp): exit and signal hooks, fork handling.
void install_process_hooks();

void warn(const std::string& text);

}  // namespace stallscope::detail
