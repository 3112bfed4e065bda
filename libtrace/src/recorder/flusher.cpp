// The flusher thread: drains thread buffers into chunks at a bounded
// interval (sooner when a buffer passes half full: its producer wakes the
// flusher; and at a control poll, every 100 ms, when one is past a
// quarter), polls the run directory's control file, and performs flushes
// requested from signal handlers. Between those it sleeps: an idle traced
// process costs one wake-up per control poll, not one per 10 ms.
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "recorder/recorder.hpp"
#include "stallscope/clock.hpp"
#include "sys/own_thread.hpp"

namespace stallscope::detail {
namespace {

constexpr int kControlPollMs = 100;

// Sleeps until `word` changes from `seen` or `ms` pass.
void futex_wait_ms(std::atomic<uint32_t>& word, uint32_t seen, int64_t ms) {
  if (ms <= 0) return;
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen, &ts,
            nullptr, 0);
}

// The recorder's flush working set (Recorder::flush_*), in pages of its
// own: a flush allocates nothing from the C heap (RELIABILITY.md 39).
struct Pending {
  PageVec<uint8_t>& payload;
  PageVec<TrackCounts>& counts;  // per track block
  // False once memory ran out for these pages: the flush stops and tracing
  // turns off. No exception: throwing allocates (RELIABILITY.md 39).
  bool ok = true;

  bool need(bool got) {
    ok = ok && got;
    return ok;
  }
};

// Drains what one buffer holds now into `p` as track blocks of at most
// `target` bytes; `full` is called whenever `p` reaches the target.
template <typename Full>
void drain_buffer(ThreadBuffer& b, Pending& p, size_t target, Full&& full) {
  size_t left = b.pending_bytes();  // what a fast producer adds waits
  while (left > 0 && p.ok) {
    const size_t at = p.payload.size();
    const size_t most = target < left ? target : left;
    if (!p.need(p.payload.grow_to(at + sizeof(format::TrackBlock) + most))) return;
    const size_t n = b.drain(p.payload.data() + at + sizeof(format::TrackBlock), most);
    p.payload.resize(at + sizeof(format::TrackBlock) + n);
    if (n == 0) {
      p.payload.resize(at);
      return;
    }
    format::TrackBlock blk{b.track_id(), static_cast<uint32_t>(n)};
    std::memcpy(p.payload.data() + at, &blk, sizeof blk);
    RecordCounts c;
    count_records(p.payload.data() + at + sizeof blk, n, c);
    if (!p.need(p.counts.push_back({b.track_id(), c}))) return;
    left = n < left ? left - n : 0;
    if (p.payload.size() >= target) full();
  }
}

void account(Recorder& r, Pending& p, bool written) {
  for (const auto& [track, c] : p.counts) {
    if (r.track_written.size() <= track && !p.need(r.track_written.resize(track + 1, 0))) return;
    if (r.track_disk_dropped.size() <= track &&
        !p.need(r.track_disk_dropped.resize(track + 1, 0)))
      return;
    (written ? r.track_written : r.track_disk_dropped)[track] += c.events;
    if (!written) r.disk_dropped += c.events;
  }
}

// One note; the file and the run directory closed, so that a deleted
// file's disk space is released now, not at exit (RELIABILITY.md 4, 44).
void stop_on_failure(Recorder& r) {
  if (r.state.load() == State::kFailed) return;
  warn(r.writer.failure());
  g_capture.store(false, std::memory_order_relaxed);
  r.state.store(State::kFailed);
  r.writer.release();
}

// The first events chunk refused for the budget: one note naming the
// knobs, and each track's buffer drops so far (see end_payload).
void on_budget_spent(Recorder& r) {
  if (!r.buffer_drops_at_budget.empty() || !r.writer.budget_spent()) return;
  for (const auto& t : r.registry.totals()) {
    if (r.buffer_drops_at_budget.size() <= t.track_id)
      r.buffer_drops_at_budget.resize(t.track_id + 1, 0);
    r.buffer_drops_at_budget[t.track_id] = t.dropped_buffer;
  }
  if (r.buffer_drops_at_budget.empty()) r.buffer_drops_at_budget.resize(1, 0);
  char knob[160];
  if (r.cfg.max_for_fsize) {
    std::snprintf(knob, sizeof knob, "%llu KiB: STALLSCOPE_MAX_MB lowered for ulimit -f",
                  static_cast<unsigned long long>(r.cfg.max_file_bytes >> 10));
  } else {
    std::snprintf(knob, sizeof knob, "STALLSCOPE_MAX_MB=%llu",
                  static_cast<unsigned long long>(r.cfg.max_file_bytes >> 20));
  }
  warn(r.writer.path() + " reached its disk budget (" + knob +
       "): later events are dropped and counted as disk drops; raise " +
       (r.cfg.max_for_fsize ? "ulimit -f" : "STALLSCOPE_MAX_MB (0: no limit)") +
       ", or STALLSCOPE_MAX_MODE=ring keeps the newest");
}

void write_events(Recorder& r, Pending& p) {
  if (p.payload.empty()) return;
  uint64_t events = 0;
  for (const auto& pc : p.counts) events += pc.counts.events;
  auto res = r.writer.write_chunk(format::ChunkType::kEvents, p.payload.data(),
                                  static_cast<uint32_t>(p.payload.size()), false, events);
  account(r, p, res == FileWriter::Write::kOk);
  if (res == FileWriter::Write::kOk) progress_scan(r, p.payload.data(), p.payload.size());
  if (r.progress.steps > 0 && !r.steps_seen.load(std::memory_order_relaxed))
    r.steps_seen.store(true, std::memory_order_relaxed);  // the flusher loop acts on it
  if (res == FileWriter::Write::kFailed) stop_on_failure(r);
  if (res == FileWriter::Write::kBudget) on_budget_spent(r);
  p.payload.clear();
  p.counts.clear();
}

void write_table(Recorder& r, format::ChunkType type, const std::vector<uint8_t>& payload) {
  if (payload.empty()) return;
  if (r.writer.write_chunk(type, payload.data(), static_cast<uint32_t>(payload.size()), true,
                           0) == FileWriter::Write::kFailed)
    stop_on_failure(r);
}

void write_table(Recorder& r, format::ChunkType type, const PageVec<uint8_t>& payload) {
  if (payload.empty()) return;
  if (r.writer.write_chunk(type, payload.data(), static_cast<uint32_t>(payload.size()), true,
                           0) == FileWriter::Write::kFailed)
    stop_on_failure(r);
}

void write_attachments(Recorder& r) {
  std::vector<std::pair<std::string, std::string>> to_write;
  {
    std::lock_guard lock(r.attach_mu);
    to_write.swap(r.pending_attachments);
  }
  for (const auto& [name, data] : to_write) {
    format::AttachmentHeader h{static_cast<uint32_t>(name.size()), 0, data.size()};
    std::vector<uint8_t> payload(format::pad8(uint32_t(sizeof h + name.size() + data.size())), 0);
    std::memcpy(payload.data(), &h, sizeof h);
    std::memcpy(payload.data() + sizeof h, name.data(), name.size());
    std::memcpy(payload.data() + sizeof h + name.size(), data.data(), data.size());
    write_table(r, format::ChunkType::kAttachment, payload);
  }
}

std::vector<uint8_t> end_payload(Recorder& r) {
  auto totals = r.registry.totals();
  format::EndSummary s{};
  s.n_tracks = static_cast<uint32_t>(totals.size());
  s.end_mono_ns = static_cast<uint64_t>(mono_ns());
  s.disk_dropped = r.disk_dropped;
  s.bytes_written = r.writer.bytes_written();
  std::vector<uint8_t> out(sizeof s + totals.size() * sizeof(format::TrackTotals));
  size_t at = sizeof s;
  const bool spent = !r.buffer_drops_at_budget.empty();
  for (const auto& t : totals) {
    format::TrackTotals tt{};
    tt.track_id = t.track_id;
    tt.written = t.track_id < r.track_written.size() ? r.track_written[t.track_id] : 0;
    tt.dropped_buffer = t.dropped_buffer;
    tt.dropped_disk = t.track_id < r.track_disk_dropped.size() ? r.track_disk_dropped[t.track_id] : 0;
    if (spent) {  // drops after the budget was spent are the budget's (a track since: all)
      const uint64_t before =
          t.track_id < r.buffer_drops_at_budget.size() ? r.buffer_drops_at_budget[t.track_id] : 0;
      const uint64_t later = tt.dropped_buffer > before ? tt.dropped_buffer - before : 0;
      tt.dropped_buffer -= later;
      tt.dropped_disk += later;
      s.disk_dropped += later;
    }
    std::memcpy(out.data() + at, &tt, sizeof tt);
    at += sizeof tt;
  }
  std::memcpy(out.data(), &s, sizeof s);
  return out;
}

// A buffer holding more than 1/`parts` of its capacity.
bool any_buffer_past(Recorder& r, size_t parts) { return r.registry.any_buffer_past(parts); }

bool any_buffer_half_full(Recorder& r) { return any_buffer_past(r, 2); }

// Reads RUN/control into buf; -1 when it is not a regular file (a FIFO, a
// device, a symlink: never opened in a way that could wait, never followed).
ssize_t read_control(int dir, char* buf, size_t size) {
  const int fd = ::openat(dir, "control", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st{};
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ::read(fd, buf, size);
  ::close(fd);
  return n;
}

// RUN/control, reached through the run directory's descriptor: the
// directory removed or replaced by a symlink since the start is never
// followed (RELIABILITY.md 44).
void poll_control(Recorder& r) {
  const int dir = r.writer.dir_fd();
  if (dir < 0) return;
  struct stat st{};
  if (::fstatat(dir, "control", &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISREG(st.st_mode)) {
    if (!r.control_refused) warn(r.control_path + ": not a regular file; ignored");
    r.control_refused = true;
    return;
  }
  r.control_refused = false;
  const int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime == r.control_mtime_ns) return;
  r.control_mtime_ns = mtime;
  char buf[32] = {};
  const ssize_t n = read_control(dir, buf, sizeof buf - 1);
  if (n < 0) return;
  std::string_view s(buf, static_cast<size_t>(n));
  if (s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);  // a UTF-8 BOM (Windows editors)
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  if (s == "on" || s == "off") {
    stallscope_capture_set(s == "on" ? 1 : 0);
  } else if (s == "end") {
    // `stallscope run --exit-after-window` ends the process next (SIGKILL):
    // the file is completed now, as at exit, and tracing stops.
    if (r.sampler) r.sampler->stop();
    r.final_requested.store(true);
    r.flush_requested.fetch_add(1);
  } else {
    warn(r.control_path + ": expected 'on' or 'off', found '" + std::string(s) + "'; ignored");
  }
}

void flusher_main(Recorder* r) {
  r->flusher_tid.store(static_cast<uint32_t>(::gettid()), std::memory_order_release);
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  // Linux thread names hold 15 bytes; the shim tells its own threads by the prefix.
  pthread_setname_np(pthread_self(), "stallscope-flsh");
  using Clock = std::chrono::steady_clock;
  auto next_flush = Clock::now() + std::chrono::milliseconds(r->cfg.flush_ms);
  auto next_control = Clock::now();
  const auto sample_every = std::chrono::milliseconds(r->cfg.worker_sample_ms);
  auto next_sample = Clock::now() + sample_every;
  // The wake word as of the last flush: a wake during or after it changes
  // the word, so the wait below returns at once and the next pass flushes.
  uint32_t seen = r->wake_word.load(std::memory_order_acquire);
  // RUN/control is read once before anything else, even when the program
  // is already exiting (stop set before this thread first ran) — but after
  // the start is complete: its "off" then closes the window the start
  // opened, never comes before it (or is lost while not yet running).
  wait_until_started();
  poll_control(*r);
  next_control = Clock::now() + std::chrono::milliseconds(kControlPollMs);
  while (!r->stop.load()) {
    const bool asked_before = r->flush_requested.load() > r->flush_done.load();
    if (!asked_before && !any_buffer_half_full(*r) && !r->stop.load()) {
      auto until = std::min(next_flush, next_control);
      if (r->sample_in_flusher) until = std::min(until, next_sample);
      const int64_t ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count() + 1;
      futex_wait_ms(r->wake_word, seen, ms);
    }
    // Woken: a producer's ring is (about to be) past half full, capture
    // closed, or a flush was asked for — each wants a flush now.
    const bool woken = r->wake_word.load(std::memory_order_acquire) != seen;
    const auto now = Clock::now();
    bool polled = false;
    if (now >= next_control) {
      poll_control(*r);
      next_control = now + std::chrono::milliseconds(kControlPollMs);
      polled = true;
    }
    // Never a new thread while closing or ending.
    if (r->sample_in_flusher && !r->stop.load() && !r->final_requested.load()) {
      if (r->steps_seen.load(std::memory_order_relaxed)) {
        // A worker that runs steps (a trainer forked without exec): a sampler
        // thread at the full period, with every counter.
        r->sample_in_flusher.store(false);
        r->sampler->set_machine_wide(true);
        r->sampler->set_period_ms(r->cfg.sample_ms);
        start_sampler_thread(*r);
      } else if (now >= next_sample) {
        r->sampler->sample_once();
        next_sample = now + sample_every;
      }
    }
    const uint64_t requested = r->flush_requested.load();
    const bool asked = requested > r->flush_done.load();
    // At a control poll a buffer past a quarter is drained too: under a long
    // STALLSCOPE_FLUSH_MS it would otherwise sit up to half full between
    // wakes, leaving a burst only the other half.
    const bool residue = polled && any_buffer_past(*r, 4);
    if (!asked && !woken && !residue && now < next_flush && !any_buffer_half_full(*r)) continue;
    const bool final = asked && r->final_requested.load();
    seen = r->wake_word.load(std::memory_order_acquire);
    flush_now(*r, final);
    next_flush = now + std::chrono::milliseconds(r->cfg.flush_ms);
    if (asked) r->flush_done.store(requested);
    if (final) return;
  }
}

void* flusher_thread(void* arg) {
  auto* r = static_cast<Recorder*>(arg);
  try {
    flusher_main(r);
  } catch (...) {  // out of memory: the program goes on, untraced
    tracing_off_after_exception("the flusher");
    r->flusher_gone.store(true);
  }
  return nullptr;
}

}  // namespace

void flush_now(Recorder& r, bool final) {
  std::lock_guard lock(r.flush_mu);
  if (r.state.load() == State::kFailed || r.state.load() == State::kIdle) return;
  if (r.writer.path().empty()) return;
  if (r.writer.sealed()) return;  // an exec in progress: the file is complete (seal_for_exec)
  if (!r.writer.failed() && !r.writer.check_descriptor()) stop_on_failure(r);
  // Drain first, then take names and tracks: every name an event uses was
  // interned before the event was written, so it is in this table chunk.
  Pending p{r.flush_payload, r.flush_counts};
  p.payload.clear();
  p.counts.clear();
  auto write_tables = [&r, &p] {
    if (p.need(r.registry.take_new_strings(r.flush_table)))
      write_table(r, format::ChunkType::kStrings, r.flush_table);
    if (p.need(r.registry.take_new_tracks(r.flush_table)))
      write_table(r, format::ChunkType::kTracks, r.flush_table);
  };
  auto write_pending = [&r, &p, &write_tables] {
    write_tables();
    if (p.ok) write_events(r, p);
  };
  const size_t target = r.writer.chunk_target();
  if (p.need(r.registry.buffers(r.flush_buffers))) {
    for (ThreadBuffer* b : r.flush_buffers) drain_buffer(*b, p, target, write_pending);
  }
  write_tables();
  if (p.ok) write_attachments(r);
  if (p.ok) write_events(r, p);
  p.need(r.registry.collect_retired());
  if (!p.ok) {  // memory ran out: the file stays as last written
    tracing_off_after_exception("the flusher");
    return;
  }
  if (!final) progress_publish(r, false);
  if (final) {
    r.writer.close(end_payload(r));
    r.state.store(State::kClosed);
    g_capture.store(false, std::memory_order_relaxed);
    progress_publish(r, true);
  }
}

SignalsBlocked::SignalsBlocked() noexcept {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old_);
}

SignalsBlocked::~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

int start_flusher(Recorder& r) {
  g_half_full_hook = &wake_flusher;
  // Small stack, every signal blocked from the start, no exception.
  const int err = sys::start_own_thread(&r.flusher, &flusher_thread, &r);
  r.flusher_started = err == 0;
  if (err != 0) g_half_full_hook = nullptr;
  return err;
}

bool on_flusher_thread(const Recorder& r) noexcept {
  return r.flusher_started && pthread_equal(r.flusher, pthread_self()) != 0;
}

void wake_flusher() noexcept {
  Recorder& r = recorder();
  r.wake_word.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&r.wake_word), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
}

bool request_flush_and_wait(bool final, int timeout_ms) noexcept {
  Recorder& r = recorder();
  if (r.state.load() != State::kRunning || r.pid != ::getpid()) return false;
  if (r.flusher_gone.load()) return false;  // nobody to wait for
  if (on_flusher_thread(r)) return false;  // never wait for ourselves
  if (final) r.final_requested.store(true);
  const uint64_t want = r.flush_requested.fetch_add(1) + 1;
  wake_flusher();
  for (int waited = 0; waited < timeout_ms; ++waited) {
    if (r.flush_done.load() >= want) return true;
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  return false;
}

bool seal_for_exec() noexcept {
  Recorder& r = recorder();
  if (r.state.load() != State::kRunning || r.pid != ::getpid()) return false;
  try {
    flush_now(r, false);  // the bulk; what comes meanwhile stays in the buffers
    std::lock_guard lock(r.flush_mu);
    if (r.state.load() != State::kRunning || r.writer.path().empty()) return false;
    write_table(r, format::ChunkType::kStrings, r.registry.take_new_strings());
    write_table(r, format::ChunkType::kTracks, r.registry.take_new_tracks());
    return r.state.load() == State::kRunning && r.writer.seal(end_payload(r));
  } catch (...) {  // out of memory: the exec goes on, the file truncated
    return false;
  }
}

void unseal_after_exec() noexcept {
  Recorder& r = recorder();
  try {
    std::lock_guard lock(r.flush_mu);
    if (!r.writer.sealed()) return;
    if (!r.writer.unseal()) stop_on_failure(r);
  } catch (...) {
    g_capture.store(false, std::memory_order_relaxed);
    r.state.store(State::kFailed);
  }
  wake_flusher();  // what the buffers gathered meanwhile
}

void close_recorder() {
  Recorder& r = recorder();
  if (r.state.load() != State::kRunning || r.pid != ::getpid()) return;
  g_capture.store(false, std::memory_order_relaxed);
  if (r.sampler) r.sampler->stop();
  r.stop.store(true);
  wake_flusher();
  if (r.flusher_started && !on_flusher_thread(r)) {
    r.flusher_started = false;
    pthread_join(r.flusher, nullptr);
  }
  // A forked worker's flusher may have started the sampler thread meanwhile.
  if (r.sampler) r.sampler->stop();
  if (r.state.load() != State::kRunning) return;
  try {
    flush_now(r, true);
  } catch (...) {  // out of memory at exit: the file stays as last flushed
    tracing_off_after_exception("the final flush");
  }
}

}  // namespace stallscope::detail
