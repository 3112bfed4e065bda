// Recorder start-up and the per-event hot path.
#include "recorder/recorder.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"
#include "stallscope/internal/process_facts.hpp"
#include "stallscope/internal/note.hpp"

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
struct ProxyTracks {
  std::vector<std::pair<uint32_t, ThreadBuffer*>> by_tid;
  void retire() {
    for (auto& [tid, b] : by_tid)
      if (b != nullptr) b->retire();
    by_tid.clear();
  }
};
thread_local ProxyTracks t_proxies;
thread_local uint32_t t_tid = 0;  // this thread's tid, once asked

// Marks the thread's buffer retired when the thread exits, so the flusher
// drains what is left and frees it (RELIABILITY.md 2).
struct ThreadExit {
  ~ThreadExit() {
    if (stallscope_inline_v1_thread_buffer != nullptr) stallscope_inline_v1_thread_buffer->retire();
    stallscope_inline_v1_thread_buffer = nullptr;
    t_proxies.retire();
    t_state = kNoBuffer;  // late events after this point are dropped
  }
};
thread_local ThreadExit t_exit;

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
  // Counter names are literals; intern each once (under the sampler's tick
  // lock: one tick at a time, whichever thread takes it).
  auto ids = std::make_shared<std::unordered_map<const char*, NameId>>();
  o.sink = [ids](const char* name, double value, uint64_t subject) {
    // A few hundred bytes a tick, drained every flush: a small buffer (its
    // pages are all touched when it is made).
    thread_local bool registered = false;
    if (!registered) {
      registered = true;
      register_current_thread(kSamplerBufferBytes);
    }
    auto [it, fresh] = ids->try_emplace(name, 0);
    if (fresh) it->second = intern(name);
    record_counter(it->second, value, subject);
  };
  r.sampler = std::make_unique<sys::CpuSampler>(std::move(o));
  r.live_sampler.store(r.sampler.get(), std::memory_order_release);
}

bool start_locked(Recorder& r) {
  const sys::EnvLookup env = sys::process_env();
  r.cfg = load_config(env);
  for (const auto& w : r.cfg.warnings) warn(w);
  if (!r.cfg.enabled || !open_trace_file(r, env)) return false;
  r.registry.set_budget(r.cfg.buffer_bytes);
  r.flusher_buffer = r.registry.add_thread(static_cast<uint32_t>(r.pid), "stallscope",
                                           64u << 10, format::TrackType::kProcess);
  if (r.flusher_buffer != nullptr) r.process_track = r.flusher_buffer->track_id();
  install_process_hooks();
  make_sampler(r);
  start_flusher(r);
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
  SignalsBlocked blocked;  // the sampler thread starts with every signal blocked
  r.sampler->start();
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
  Recorder* fresh = new Recorder();
  fresh->registry.adopt_names_after_fork(old->registry);
  fresh->sampled_by_parent = old->sampler != nullptr;
  g_recorder = fresh;
  stallscope_inline_v1_thread_buffer = nullptr;
  t_state = kUnregistered;
  t_track = 0;
  t_drops = nullptr;
  t_proxies.by_tid.clear();  // the parent's, in the parent's file
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
  if (!start_locked(r)) {
    r.state.store(State::kFailed, std::memory_order_release);
    g_capture.store(false, std::memory_order_relaxed);
    return false;
  }
  return true;
}

ThreadBuffer* register_current_thread(size_t bytes) {
  if (t_state == kNoBuffer) {  // counted without a lock: this is every event of the thread
    if (t_drops != nullptr) t_drops->fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  const ErrnoKeeper keep_errno;
  if (!ensure_started()) return nullptr;
  Recorder& r = recorder();
  (void)&t_exit;  // arms the thread-exit hook
  const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  stallscope_inline_v1_thread_buffer = r.registry.add_thread(tid, thread_name(),
                                bytes != 0 ? round_buffer_size(bytes) : r.cfg.thread_buffer_bytes,
                                format::TrackType::kThread, &t_track);
  t_state = stallscope_inline_v1_thread_buffer != nullptr ? kBuffered : kNoBuffer;
  if (stallscope_inline_v1_thread_buffer == nullptr) {
    t_drops = r.registry.unbuffered_counter(t_track);
    if (t_drops != nullptr) t_drops->fetch_add(1, std::memory_order_relaxed);  // this event
  }
  return stallscope_inline_v1_thread_buffer;
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
  for (const auto& [t, b] : t_proxies.by_tid)
    if (t == tid) return b;
  if (t_proxies.by_tid.size() >= kMaxProxyTracks) return nullptr;
  const ErrnoKeeper keep_errno;
  if (!ensure_started()) return nullptr;
  (void)&t_exit;  // arms the thread-exit hook
  Recorder& r = recorder();
  ThreadBuffer* b = nullptr;
  try {
    b = r.registry.add_thread(tid, thread_name(), r.cfg.thread_buffer_bytes);
    t_proxies.by_tid.emplace_back(tid, b);
  } catch (...) {  // out of memory: the own track
    if (b != nullptr) b->retire();
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
  try {
    return detail::recorder().registry.intern(name);
  } catch (...) {
    return 0;
  }
}

}  // namespace stallscope
