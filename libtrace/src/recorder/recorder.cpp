// Recorder start-up and the per-event hot path.
#include "recorder/recorder.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"
#include "stallscope/internal/process_facts.hpp"
#include "stallscope/internal/note.hpp"
#include "stallscope/internal/task_limits.hpp"

namespace stallscope {
namespace detail {

// Starts true so that the first event takes the slow path that starts the
// recorder; false for good once tracing is off, failed or closed.
std::atomic<bool> g_capture{true};

namespace {

format::ClockTriple g_load_triple{};

__attribute__((constructor(101))) void on_load() {
  g_ticks_are_tsc = detect_invariant_tsc();
  g_load_triple = sample_clock_triple();
}

Recorder* g_recorder = new Recorder();  // leaked: see recorder.hpp
std::mutex g_start_mu;

}  // namespace

}  // namespace detail
}  // namespace stallscope

extern "C" {
STALLSCOPE_API thread_local constinit stallscope::detail::ThreadBuffer*
    stallscope_inline_v1_thread_buffer __attribute__((tls_model("initial-exec"))) = nullptr;
}

namespace stallscope {
namespace detail {

namespace {

enum : uint8_t { kUnregistered = 0, kBuffered = 1, kNoBuffer = 2 };
thread_local uint8_t t_state __attribute__((tls_model("initial-exec"))) = kUnregistered;
thread_local uint32_t t_track __attribute__((tls_model("initial-exec"))) = 0;
// Drop counter of a thread that got no buffer (memory budget spent).
thread_local std::atomic<uint64_t>* t_drops __attribute__((tls_model("initial-exec"))) = nullptr;

// The tracks this thread writes for other threads (emit_for_thread), by tid;
// a null buffer: none could be had (budget), its records go to the own track.
// Made at the thread's first such record (a plain pointer here: thread-locals
// with destructors register them with calloc, which kills the process when
// memory is exhausted).
struct ProxyTracks {
  size_t n = 0;
  std::pair<uint32_t, ThreadBuffer*> by_tid[kMaxProxyTracks];
  void retire() noexcept {
    for (size_t i = 0; i < n; ++i)
      if (by_tid[i].second != nullptr) by_tid[i].second->retire();
    n = 0;
  }
};
thread_local ProxyTracks* t_proxies = nullptr;
thread_local uint32_t t_tid = 0;  // this thread's tid, once asked

// Marks the thread's buffers retired when the thread exits, so the flusher
// drains what is left and frees them (RELIABILITY.md 2): a pthread key's
// destructor, armed at the thread's registration without allocating (keys
// below PTHREAD_KEY_2NDLEVEL_SIZE live in the thread's descriptor).
pthread_key_t g_exit_key;
bool g_exit_key_made = false;  // under g_start_mu, before any registration

void on_thread_exit(void*) noexcept {
  if (stallscope_inline_v1_thread_buffer != nullptr) stallscope_inline_v1_thread_buffer->retire();
  stallscope_inline_v1_thread_buffer = nullptr;
  if (t_proxies != nullptr) {
    t_proxies->retire();
    delete t_proxies;
    t_proxies = nullptr;
  }
  t_state = kNoBuffer;  // late events after this point are dropped
}

void arm_thread_exit() noexcept {
  if (g_exit_key_made) pthread_setspecific(g_exit_key, &g_exit_key);  // any non-null value
}

// Keeps errno across the recorder's own work on a traced thread: a
// thread's first event may start the recorder, open files and make system
// calls, and its caller (a wrapped read) returns an errno of its own.
struct ErrnoKeeper {
  int saved = errno;
  ~ErrnoKeeper() { errno = saved; }
};

std::string thread_name() {
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return {};
  return name;
}

uint64_t estimate_tsc_hz(const format::ClockTriple& now) {
  if (!g_ticks_are_tsc) return 1000000000;
  format::ClockTriple a = g_load_triple, b = now;
  if (b.mono_ns - a.mono_ns < 1000000) {  // too close for 0.1 % precision
    timespec ts{0, 2000000};
    nanosleep(&ts, nullptr);
    b = sample_clock_triple();
  }
  const double dt = double(b.mono_ns - a.mono_ns);
  return dt > 0 ? uint64_t(double(b.ticks - a.ticks) * 1e9 / dt) : 0;
}

nlohmann::json metadata_json(const sys::ProcessFacts& facts, const sys::RankInfo& rank,
                             const sys::RunDirChoice& choice, const std::string& dir,
                             const RecorderConfig& cfg) {
  nlohmann::json m = sys::to_json(facts);
  m["rank"] = rank.rank;
  m["rank_source"] = rank.rank_source;
  m["world_size"] = rank.world_size;
  m["world_size_source"] = rank.world_source;
  m["launcher"] = rank.launcher;
  m["run_dir"] = dir;
  m["run_id"] = choice.id;
  m["run_id_source"] = choice.source;
  m["clock"] = g_ticks_are_tsc ? "tsc" : "monotonic";
  m["recorder_version"] = "0.1.0";
  m["config"] = {{"buffer_mb", cfg.buffer_bytes >> 20},
                 {"thread_buffer_kb", cfg.thread_buffer_bytes >> 10},
                 {"max_mb", cfg.max_file_bytes >> 20},
                 {"max_mode", cfg.disk_mode == DiskMode::kRing ? "ring" : "stop"},
                 {"flush_ms", cfg.flush_ms},
                 {"sample_ms", cfg.sample_ms},
                 {"worker_sample_ms", cfg.worker_sample_ms},
                 {"capture_at_start", cfg.capture_at_start}};
  return m;
}

// Opens the trace file and writes the metadata chunk; false on failure.
bool open_trace_file(Recorder& r, const sys::EnvLookup& env) {
  sys::ProcessFacts facts = sys::collect_process_facts();
  sys::RankInfo rank = sys::resolve_rank(env, facts.comm, facts.cmdline);
  sys::RunDirChoice choice = sys::choose_run_dir(env, facts.host, facts.pid);
  const std::string key = sys::run_key(env, facts.boot_id, facts.start_time_ticks, facts.pid);
  std::string error;
  r.run_dir = sys::claim_run_dir(choice, key, &error);
  if (r.run_dir.empty()) {
    warn("cannot use run directory: " + error + "; tracing is off");
    return false;
  }
  // Children (forked workers, exec'd tools) write into the same run, even
  // when the claim moved to another directory ("-2").
  setenv("STALLSCOPE_OUT", r.run_dir.c_str(), 1);
  setenv("STALLSCOPE_RUN_KEY", key.c_str(), 1);
  r.control_path = r.run_dir + "/control";

  WriterOptions w;
  w.dir = r.run_dir;
  w.base = sys::trace_file_base(facts.host, rank, facts.pid);
  w.max_bytes = r.cfg.max_file_bytes;
  w.ring = r.cfg.disk_mode == DiskMode::kRing;
  w.header.pid = static_cast<uint32_t>(facts.pid);
  w.header.parent_pid = static_cast<uint32_t>(facts.parent_pid);
  w.header.start = sample_clock_triple();
  w.header.tsc_hz = estimate_tsc_hz(w.header.start);
  w.header.flags = g_ticks_are_tsc ? 0u : uint32_t{format::kFileTicksAreNs};
  if (r.writer.open(w, &error) != 0) {
    warn(error + "; tracing is off");
    return false;
  }
  if (!r.writer.note().empty()) warn(r.writer.note());
  const std::string meta = metadata_json(facts, rank, choice, r.run_dir, r.cfg).dump();
  std::vector<uint8_t> payload(format::pad8(static_cast<uint32_t>(meta.size())), ' ');
  std::copy(meta.begin(), meta.end(), payload.begin());
  r.writer.write_chunk(format::ChunkType::kMetadata, payload.data(),
                       static_cast<uint32_t>(payload.size()), true, 0);
  r.pid = facts.pid;
  progress_open(r, r.writer.base());
  return true;
}

constexpr size_t kSamplerBufferBytes = 256u << 10;  // ~40 B per thread and tick

// Makes `b` (registered by another thread for this one) the calling
// thread's ring, allocating nothing.
void adopt_ring(ThreadBuffer* b, uint32_t track) noexcept {
  stallscope_inline_v1_thread_buffer = b;
  t_track = track;
  t_state = kBuffered;
}

}  // namespace

// What the sampler's sink needs, made on the starting thread.
struct SamplerSink {
  struct Name {
    const char* text;
    const char* seen;  // the last pointer that matched `text`
    NameId id;
  };
  Name names[std::size(sys::kCounterNames)];
  // The rings of the threads that sample (the sampling thread; in a forked
  // worker, the flusher), registered before they first sample.
  struct Ring {
    std::atomic<uint32_t> tid{0};
    ThreadBuffer* buffer = nullptr;
    uint32_t track = 0;
  };
  Ring rings[2];

  void prepare_ring(size_t i, Recorder& r, uint32_t tid, const char* name) {
    uint32_t track = 0;
    rings[i].buffer = r.registry.add_thread(tid, name, kSamplerBufferBytes,
                                            format::TrackType::kThread, &track);
    rings[i].track = track;
    rings[i].tid.store(tid, std::memory_order_release);
  }
  void adopt_or_register() {
    const uint32_t tid = current_tid();
    for (Ring& ring : rings) {
      if (ring.tid.load(std::memory_order_acquire) == tid && ring.buffer != nullptr)
        return adopt_ring(ring.buffer, ring.track);
    }
    // A few hundred bytes a tick, drained every flush: a small buffer.
    register_current_thread(kSamplerBufferBytes);
  }
  NameId id_of(const char* name) {
    for (Name& n : names) {
      if (n.seen == name) return n.id;
      if (std::strcmp(n.text, name) == 0) {
        n.seen = name;
        return n.id;
      }
    }
    return intern(name);  // a counter kCounterNames lacks: interned here
  }
};

namespace {

// Builds the sampler. In a forked worker (see Recorder::sampled_by_parent)
// it gets no thread of its own: the flusher, which wakes every 100 ms
// anyway, takes its samples, until the worker records a step.
void make_sampler(Recorder& r) {
  if (r.cfg.sample_ms <= 0) return;
  sys::SamplerOptions o;
  o.period_ms = r.cfg.sample_ms;
  if (r.sampled_by_parent && r.cfg.worker_sample_ms > r.cfg.sample_ms) {
    o.period_ms = r.cfg.worker_sample_ms;
    o.machine_wide = false;  // the parent reports idle CPUs and the cgroup
    r.sample_in_flusher = true;
  }
  // Counter names interned and the sampling thread's ring registered here
  // and in before_first_tick, on the starting thread: the sink runs under
  // the sampler's tick lock (one tick at a time) and allocates nothing.
  auto sink = std::make_shared<SamplerSink>();
  for (size_t i = 0; i < std::size(sys::kCounterNames); ++i)
    sink->names[i] = {sys::kCounterNames[i], nullptr, intern(sys::kCounterNames[i])};
  o.sink = [sink](const char* name, double value, uint64_t subject) {
    thread_local bool registered = false;
    if (!registered) {
      registered = true;
      sink->adopt_or_register();
    }
    record_counter(sink->id_of(name), value, subject);
  };
  o.before_first_tick = [sink, &r](pid_t tid) {
    sink->prepare_ring(0, r, static_cast<uint32_t>(tid), "stallscope-samp");
  };
  r.sampler_sink = sink;
  r.sampler = std::make_unique<sys::CpuSampler>(std::move(o));
  r.live_sampler.store(r.sampler.get(), std::memory_order_release);
}

// Whether stallscope's `threads` threads leave the program room under its
// process and thread limits (RELIABILITY.md 40); if not, says so.
bool room_for_own_threads(int threads) {
  const sys::TaskRoom room = sys::task_room();
  if (sys::room_for_threads(room, threads)) return true;
  warn(std::string(room.what) + " is " + std::to_string(room.limit) + " with " +
       std::to_string(room.used) + " in use: too little room for " + std::to_string(threads) +
       " threads of stallscope's and the program's own; tracing is off so that the program's "
       "threads and processes can start");
  return false;
}

// The note for a recorder thread that could not start.
void thread_refused(const char* which, int err, bool tracing_off) {
  warn(std::string("cannot start its ") + which + " thread (" + std::strerror(err) +
       (err == EAGAIN ? ": a process or thread limit, RLIMIT_NPROC (ulimit -u) or the "
                        "cgroup's pids.max" : "") +
       ")" + (tracing_off ? "; tracing is off" : "; CPU samples are off"));
}

bool start_locked(Recorder& r) {
  const sys::EnvLookup env = sys::process_env();
  r.cfg = load_config(env);
  for (const auto& w : r.cfg.warnings) warn(w);
  if (!r.cfg.enabled) return false;
  if (!g_exit_key_made) g_exit_key_made = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
  if (!room_for_own_threads(r.cfg.sample_ms > 0 ? 2 : 1)) return false;
  if (!open_trace_file(r, env)) return false;
  r.registry.set_budget(r.cfg.buffer_bytes);
  r.flusher_buffer = r.registry.add_thread(static_cast<uint32_t>(r.pid), "stallscope",
                                           64u << 10, format::TrackType::kProcess);
  if (r.flusher_buffer != nullptr) r.process_track = r.flusher_buffer->track_id();
  install_process_hooks();
  make_sampler(r);
  if (const int err = start_flusher(r); err != 0) {
    thread_refused("flusher", err, true);
    return false;
  }
  if (r.sample_in_flusher && r.sampler_sink) {
    // The flusher samples (a forked worker): its ring made here, where
    // allocating is fine; it waits for this start to finish before sampling.
    uint32_t tid = 0;
    for (int waited_us = 0; (tid = r.flusher_tid.load()) == 0 && waited_us < 2000000;
         waited_us += 50) {
      timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
    if (tid != 0) r.sampler_sink->prepare_ring(1, r, tid, "stallscope-flsh");
  }
  r.state.store(State::kRunning, std::memory_order_release);
  if (r.sampler && !r.sample_in_flusher) start_sampler_thread(r);
  if (r.cfg.capture_at_start) {  // the first window opens now
    emit_internal(format::CoreRecord{static_cast<uint8_t>(format::Kind::kCapture),
                                     format::kBegin, 0, 0, ticks_now(), 0, 0});
  } else {
    g_capture.store(false, std::memory_order_relaxed);  // no window yet
  }
  return true;
}

}  // namespace

Recorder& recorder() { return *g_recorder; }

void wait_until_started() { std::lock_guard lock(g_start_mu); }

void start_sampler_thread(Recorder& r) {
  // Small stack, every signal blocked from the start (sys/own_thread.hpp).
  if (const int err = r.sampler->start(); err != 0) thread_refused("CPU sampler", err, false);
}

void tracing_off_after_exception(const char* where) noexcept {
  Recorder& r = recorder();
  g_capture.store(false, std::memory_order_relaxed);
  if (r.off_for_good.exchange(true)) return;  // said once
  // No allocation: memory is what ran out.
  internal::note("stallscope: ", "out of memory in %s; tracing is off", where);
}

void replace_recorder_after_fork() {
  // The parent's threads do not exist here; its recorder object (with
  // thread handles and mutex states of the parent) is abandoned, not
  // destroyed. The registry's names survive so cached name ids stay valid.
  Recorder* old = g_recorder;
  // The parent's trace file and run directory: never written here, nor
  // held open (a deleted run's disk space comes back when the parent lets
  // go, not when its last worker exits).
  old->writer.release();
  Recorder* fresh = nullptr;
  try {
    fresh = new Recorder();
    fresh->registry.adopt_names_after_fork(old->registry);
  } catch (...) {  // out of memory in the child: untraced, the parent's buffers untouched
    g_capture.store(false, std::memory_order_relaxed);
    old->state.store(State::kFailed);
    old->off_for_good.store(true);
    stallscope_inline_v1_thread_buffer = nullptr;
    t_state = kNoBuffer;
    t_drops = nullptr;
    if (t_proxies != nullptr) t_proxies->n = 0;
    return;
  }
  fresh->sampled_by_parent = old->sampler != nullptr;
  g_recorder = fresh;
  stallscope_inline_v1_thread_buffer = nullptr;
  t_state = kUnregistered;
  t_track = 0;
  t_drops = nullptr;
  if (t_proxies != nullptr) t_proxies->n = 0;  // the parent's, in the parent's file
  t_tid = 0;
  g_capture.store(true, std::memory_order_relaxed);
}

bool ensure_started() {
  Recorder& r = recorder();
  State s = r.state.load(std::memory_order_acquire);
  if (s == State::kRunning) return true;
  if (s != State::kIdle) return false;
  std::lock_guard lock(g_start_mu);
  s = r.state.load(std::memory_order_acquire);
  if (s != State::kIdle) return s == State::kRunning;
  bool started = false;
  try {
    started = start_locked(r);
  } catch (...) {  // out of memory while starting
    tracing_off_after_exception("the recorder's start");
  }
  if (!started) {
    r.state.store(State::kFailed, std::memory_order_release);
    g_capture.store(false, std::memory_order_relaxed);
    return false;
  }
  return true;
}

namespace {

// The calling pthread's stack: [lo, lo + bytes); false when unknown.
bool own_stack(uintptr_t* lo, size_t* bytes) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
  void* addr = nullptr;
  const bool ok = pthread_attr_getstack(&attr, &addr, bytes) == 0 && *bytes != 0;
  pthread_attr_destroy(&attr);
  *lo = reinterpret_cast<uintptr_t>(addr);
  return ok;
}

// Whether the calling thread is the pthread its thread-locals belong to:
// not so on a thread made by a raw clone/clone3 without CLONE_SETTLS, which
// must not register (its registration would be its creator's; see
// thread_buffer.hpp). The pthread's kernel thread id is read from its CPU
// clock id (the kernel's encoding: ~tid << 3 | per-thread | sched), which
// glibc makes from the thread's descriptor. A thread running on a signal
// stack or a fiber's stack (oneTBB's resumable tasks, greenlets) is its own
// pthread all the same: it registers, and its ring's owner check falls back
// to the thread id off the pthread's stack.
bool is_own_pthread(uint32_t tid) {
  clockid_t clock;
  if (pthread_getcpuclockid(pthread_self(), &clock) != 0) return true;  // cannot tell
  const uint32_t described = ~(static_cast<uint32_t>(clock) >> 3) & ((1u << 29) - 1);
  return described == tid;
}

// Makes the calling thread the producer of `b`.
void own_ring(ThreadBuffer* b, uint32_t tid, uintptr_t lo, size_t bytes) {
  if (b != nullptr && bytes != 0) b->set_owner(tid, lo, bytes);
}

ThreadBuffer* register_started_thread(size_t bytes) {
  Recorder& r = recorder();
  const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  if (!is_own_pthread(tid)) {
    // Someone else's thread-locals: nothing registered, the event counted
    // on the process track.
    if (r.flusher_buffer != nullptr) r.flusher_buffer->count_foreign_drop();
    return nullptr;
  }
  uintptr_t stack_lo = 0;
  size_t stack_bytes = 0;
  if (!own_stack(&stack_lo, &stack_bytes)) stack_bytes = 0;  // no owner check by stack
  arm_thread_exit();
  ThreadBuffer* b = r.registry.add_thread(
      tid, thread_name(), bytes != 0 ? round_buffer_size(bytes) : r.cfg.thread_buffer_bytes,
      format::TrackType::kThread, &t_track);
  if (b == nullptr && r.registry.take_alloc_failure()) throw std::bad_alloc();
  own_ring(b, tid, stack_lo, stack_bytes);
  stallscope_inline_v1_thread_buffer = b;
  t_state = b != nullptr ? kBuffered : kNoBuffer;
  if (b == nullptr) {
    t_drops = r.registry.unbuffered_counter(t_track);
    if (t_drops != nullptr) t_drops->fetch_add(1, std::memory_order_relaxed);  // this event
  }
  return b;
}

}  // namespace

ThreadBuffer* register_current_thread(size_t bytes) {
  if (t_state == kNoBuffer) {  // counted without a lock: this is every event of the thread
    if (t_drops != nullptr) t_drops->fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  const ErrnoKeeper keep_errno;
  if (!ensure_started()) return nullptr;
  try {
    return register_started_thread(bytes);
  } catch (...) {  // out of memory (the thread-exit hook, the name, the registry)
    t_state = kNoBuffer;
    tracing_off_after_exception("a thread's registration");
    return nullptr;
  }
}

bool emit(const format::CoreRecord& core, const void* ext, uint32_t ext_bytes) noexcept {
  if (!g_capture.load(std::memory_order_relaxed)) return false;
  ThreadBuffer* b = stallscope_inline_v1_thread_buffer;
  if (__builtin_expect(b == nullptr, 0)) {
    b = register_current_thread();
    if (b == nullptr) return false;
  }
  return b->write(core, ext, ext_bytes);
}

namespace {

// The buffer of this thread's track for thread `tid`, registered on first
// use; nullptr: write on the own track.
ThreadBuffer* proxy_buffer(uint32_t tid) {
  ProxyTracks* proxies = t_proxies;
  if (proxies != nullptr) {
    for (size_t i = 0; i < proxies->n; ++i)
      if (proxies->by_tid[i].first == tid) return proxies->by_tid[i].second;
    if (proxies->n >= kMaxProxyTracks) return nullptr;
  }
  const ErrnoKeeper keep_errno;
  if (!ensure_started()) return nullptr;
  Recorder& r = recorder();
  ThreadBuffer* b = nullptr;
  const auto self = static_cast<uint32_t>(::syscall(SYS_gettid));
  if (!is_own_pthread(self)) return nullptr;  // the own track, whose ring tells the owner from others
  uintptr_t stack_lo = 0;
  size_t stack_bytes = 0;
  if (!own_stack(&stack_lo, &stack_bytes)) stack_bytes = 0;
  try {
    b = r.registry.add_thread(tid, thread_name(), r.cfg.thread_buffer_bytes);
    if (b == nullptr && r.registry.take_alloc_failure()) throw std::bad_alloc();
    own_ring(b, self, stack_lo, stack_bytes);
    if (proxies == nullptr) t_proxies = proxies = new ProxyTracks;
    arm_thread_exit();
    proxies->by_tid[proxies->n++] = {tid, b};
  } catch (...) {  // out of memory
    if (b != nullptr) b->retire();
    tracing_off_after_exception("a thread's registration");
    return nullptr;
  }
  return b;
}

}  // namespace

bool emit_for_thread(uint32_t tid, const format::CoreRecord& core, const void* ext,
                     uint32_t ext_bytes) noexcept {
  if (!g_capture.load(std::memory_order_relaxed)) return false;
  if (t_tid == 0) t_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  ThreadBuffer* b = tid != 0 && tid != t_tid ? proxy_buffer(tid) : nullptr;
  if (b == nullptr) return emit(core, ext, ext_bytes);
  return b->write(core, ext, ext_bytes);
}

bool emit_pieces(const format::CoreRecord& core, const ThreadBuffer::Piece* pieces,
                 size_t n) noexcept {
  if (!g_capture.load(std::memory_order_relaxed)) return false;
  ThreadBuffer* b = stallscope_inline_v1_thread_buffer;
  if (__builtin_expect(b == nullptr, 0)) {
    b = register_current_thread();
    if (b == nullptr) return false;
  }
  return b->write_pieces(core, pieces, n);
}

bool emit_pieces_for_thread(uint32_t tid, const format::CoreRecord& core,
                            const ThreadBuffer::Piece* pieces, size_t n) noexcept {
  if (!g_capture.load(std::memory_order_relaxed)) return false;
  ThreadBuffer* b = tid != 0 && tid != current_tid() ? proxy_buffer(tid) : nullptr;
  if (b == nullptr) return emit_pieces(core, pieces, n);
  return b->write_pieces(core, pieces, n);
}

void emit_complete(uint8_t kind, NameId name, Ticks start, uint64_t corr) noexcept {
  const Ticks end = ticks_now();
  ThreadBuffer* b = stallscope_inline_v1_thread_buffer;
  if (__builtin_expect(b == nullptr, 0)) {
    b = register_current_thread();
    if (b == nullptr) return;
  }
  b->write_complete(kind, name, start, end - start, corr);
}

uint32_t current_track() noexcept { return t_track; }

uint32_t current_tid() noexcept {
  if (t_tid == 0) t_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return t_tid;
}

void emit_internal(const format::CoreRecord& core) {
  Recorder& r = recorder();
  if (r.flusher_buffer == nullptr) return;
  // Several threads may write capture marks: serialize the rare writers.
  std::lock_guard lock(r.internal_mu);
  r.flusher_buffer->write(core, nullptr, 0);
}

// Through the one note writer: SIGPIPE never raised, nothing written into a
// file the program has since opened at descriptor 2 (RELIABILITY.md 41).
void warn(const std::string& text) {
  if (recorder().cfg.quiet) return;
  internal::note_text("stallscope: ", text.c_str());
}

}  // namespace detail

NameId intern(std::string_view name) noexcept {
  if (name.empty()) return 0;
  auto& registry = detail::recorder().registry;
  const NameId id = registry.intern(name);  // never throws
  if (id == 0 && registry.take_alloc_failure())
    detail::tracing_off_after_exception("interning a name");
  return id;
}

}  // namespace stallscope
