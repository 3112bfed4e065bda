// The C API (trace.h) over the recorder.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "recorder/recorder.hpp"
#include "stallscope/trace.h"
#include "stallscope/trace.hpp"

using namespace stallscope;

namespace {

constexpr uint8_t kPhaseBegin = format::kBegin;
constexpr uint8_t kPhaseEnd = format::kEnd;

void emit_phase_at(format::Kind kind, uint8_t phase, NameId name, uint64_t corr, uint64_t ts,
                   const void* ext = nullptr, uint32_t ext_bytes = 0) {
  if (!enabled()) return;
  format::CoreRecord r{static_cast<uint8_t>(kind), phase, 0, name, ts, 0, corr};
  detail::emit(r, ext, ext_bytes);
}

void emit_phase(format::Kind kind, uint8_t phase, NameId name, uint64_t corr,
                const void* ext = nullptr, uint32_t ext_bytes = 0) {
  emit_phase_at(kind, phase, name, corr, ticks_now(), ext, ext_bytes);
}

// Validates caller-supplied extension records: lengths chain exactly.
bool valid_ext(const void* ext, uint32_t bytes) {
  const auto* p = static_cast<const uint8_t*>(ext);
  uint32_t off = 0;
  while (off < bytes) {
    if (bytes - off < sizeof(format::ExtHeader)) return false;
    format::ExtHeader h;
    std::memcpy(&h, p + off, sizeof h);
    if (h.type < format::kExtBase || h.bytes < sizeof h || h.bytes % 8 != 0 ||
        h.bytes > bytes - off)
      return false;
    off += h.bytes;
  }
  return true;
}

std::atomic<uint64_t> g_corr{1};

// The C API never lets an exception out (an allocation failure, almost
// always): tracing turns off with one note, the caller goes on.
template <typename F>
auto guarded(const char* where, decltype(std::declval<F>()()) failed, F&& fn) noexcept {
  try {
    return fn();
  } catch (...) {
    detail::tracing_off_after_exception(where);
    return failed;
  }
}

template <typename F>
void guarded(const char* where, F&& fn) noexcept {
  try {
    fn();
  } catch (...) {
    detail::tracing_off_after_exception(where);
  }
}

}  // namespace

extern "C" {

int stallscope_init(void) {
  return guarded("stallscope_init", -ENODEV,
                 [] { return detail::ensure_started() ? 0 : -ENODEV; });
}

int stallscope_flush(void) {
  if (detail::recorder().state.load() != detail::State::kRunning) return -ENODEV;
  return detail::request_flush_and_wait(false, 10000) ? 0 : -ETIMEDOUT;
}

void stallscope_shutdown(void) { guarded("stallscope_shutdown", [] { detail::close_recorder(); }); }

uint64_t stallscope_clock_now(void) { return ticks_now(); }

stallscope_name_t stallscope_name_intern(const char* name) {
  return name != nullptr ? intern(name) : 0;
}

uint64_t stallscope_corr_next(void) { return g_corr.fetch_add(1, std::memory_order_relaxed); }

void stallscope_thread_name_set(const char* name) {
  if (name == nullptr || !detail::ensure_started()) return;
  guarded("stallscope_thread_name_set", [name] {
    uint32_t track = detail::current_track();
    if (track == 0) {  // not registered yet: register now, then name it
      detail::register_current_thread();
      track = detail::current_track();
    }
    auto& registry = detail::recorder().registry;
    if (track != 0) registry.rename_track(track, name);
    if (registry.take_alloc_failure()) throw std::bad_alloc();
  });
}

namespace {

// Capture hooks: a fixed table, filled once by GPU sources; read lock-free.
constexpr int kMaxCaptureHooks = 4;
std::atomic<void (*)(int)> g_capture_hooks[kMaxCaptureHooks];

void call_capture_hooks(int on) {
  guarded("a capture hook", [on] {
    for (auto& h : g_capture_hooks)
      if (auto* fn = h.load(std::memory_order_acquire)) fn(on);
  });
}

}  // namespace

int stallscope_capture_hook_add(void (*fn)(int on)) {
  if (fn == nullptr) return -EINVAL;
  for (auto& h : g_capture_hooks) {
    void (*empty)(int) = nullptr;
    if (h.compare_exchange_strong(empty, fn, std::memory_order_acq_rel)) return 0;
  }
  return -ENOSPC;
}

void stallscope_capture_set(int on) {
  auto& r = detail::recorder();
  if (r.state.load() != detail::State::kRunning) return;
  if (on != 0 && r.off_for_good.load()) return;  // off after an allocation failure
  if (on == 0 && detail::g_capture.load()) call_capture_hooks(0);  // flush while still on
  const bool was = detail::g_capture.exchange(on != 0);
  if (was == (on != 0)) return;
  if (on != 0) call_capture_hooks(1);
  format::CoreRecord rec{static_cast<uint8_t>(format::Kind::kCapture),
                         on != 0 ? kPhaseBegin : kPhaseEnd, 0, 0, ticks_now(), 0, 0};
  detail::emit_internal(rec);
  // A closed window should reach the file promptly (readers wait for it).
  if (on == 0) detail::wake_flusher();
}

int stallscope_capture_enabled(void) { return enabled() ? 1 : 0; }

namespace {

// Step hooks: like the capture hooks, a fixed table read lock-free.
constexpr int kMaxStepHooks = 4;
std::atomic<void (*)(uint64_t, int)> g_step_hooks[kMaxStepHooks];
std::atomic<bool> g_any_step_hook{false};

void call_step_hooks(uint64_t index, int begin) {
  if (!g_any_step_hook.load(std::memory_order_acquire)) return;
  guarded("a step hook", [index, begin] {
    for (auto& h : g_step_hooks)
      if (auto* fn = h.load(std::memory_order_acquire)) fn(index, begin);
  });
}

}  // namespace

int stallscope_step_hook_add(void (*fn)(uint64_t index, int begin)) {
  if (fn == nullptr) return -EINVAL;
  for (auto& h : g_step_hooks) {
    void (*empty)(uint64_t, int) = nullptr;
    if (h.compare_exchange_strong(empty, fn, std::memory_order_acq_rel)) {
      g_any_step_hook.store(true, std::memory_order_release);
      return 0;
    }
  }
  return -ENOSPC;
}

void stallscope_step_begin(uint64_t index) {
  auto e = format::StepExt{{static_cast<uint8_t>(format::Ext::kStep), 0, sizeof(format::StepExt),
                            static_cast<uint32_t>(format::StepSource::kApi)},
                           index};
  emit_phase(format::Kind::kStep, kPhaseBegin, 0, index, &e, sizeof e);
  call_step_hooks(index, 1);
}

void stallscope_step_begin_at(uint64_t index, uint64_t ts) {
  const uint64_t now = ticks_now();
  auto e = format::StepExt{{static_cast<uint8_t>(format::Ext::kStep), 0, sizeof(format::StepExt),
                            static_cast<uint32_t>(format::StepSource::kApi)},
                           index};
  emit_phase_at(format::Kind::kStep, kPhaseBegin, 0, index, ts != 0 && ts <= now ? ts : now, &e,
                sizeof e);
  call_step_hooks(index, 1);
}

void stallscope_step_end(uint64_t index) {
  call_step_hooks(index, 0);
  emit_phase(format::Kind::kStep, kPhaseEnd, 0, index);
}

void stallscope_range_push(const char* name) {
  if (!enabled()) return;
  emit_phase(format::Kind::kRange, kPhaseBegin, name != nullptr ? intern(name) : 0, 0);
}

void stallscope_range_pop(void) { emit_phase(format::Kind::kRange, kPhaseEnd, 0, 0); }

void stallscope_data_wait_record(uint64_t start, uint64_t end, uint64_t batch_id) {
  record_data_wait(start, end, batch_id, format::WaitSource::kApi);
}

void stallscope_counter_record(stallscope_name_t name, double value, uint64_t subject) {
  record_counter(name, value, subject);
}

void stallscope_mark(const char* text) {
  if (!enabled() || text == nullptr) return;
  record_mark(intern(text));
}

int stallscope_event_record(uint32_t kind, stallscope_name_t name, uint64_t start, uint64_t end,
                            uint64_t corr, const void* ext, uint32_t ext_bytes) {
  if (kind == 0 || kind >= format::kExtBase || (ext == nullptr && ext_bytes != 0) ||
      end < start || !valid_ext(ext, ext_bytes))
    return -EINVAL;
  if (!enabled()) return -ENODEV;
  const uint8_t phase = end == start && kind != STALLSCOPE_STEP ? format::kInstant
                                                                  : format::kComplete;
  format::CoreRecord r{static_cast<uint8_t>(kind), phase, 0, name, start, end - start, corr};
  return detail::emit(r, ext, ext_bytes) ? 0 : -ENOBUFS;
}

}  // extern "C"
