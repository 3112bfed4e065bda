#include "relays.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "shim.hpp"
#include "stallscope/internal/thread_buffer.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"

namespace stallscope::preload {

namespace {

constexpr uint32_t kSlotBits = 13;  // 8192 objects
constexpr uint32_t kSlots = 1u << kSlotBits;

enum SlotFlags : uint8_t {
  kSymmetric = 1u << 0,       // a thread both waited on and signalled it
  kMoreWaiters = 1u << 1,     // more than two waiting threads seen
  kMoreSignallers = 1u << 2,  // more than two signalling threads seen
};

struct alignas(64) Slot {
  std::atomic<uintptr_t> obj{0};
  std::atomic<uint64_t> signal_tick{0};  // the last signal or post
  std::atomic<uint32_t> signal_tid{0};
  std::atomic<uint32_t> waiters[2] = {0, 0};
  std::atomic<uint32_t> signallers[2] = {0, 0};
  // The last (waiter, signaller) pair of a long asymmetric condition-variable
  // wait: the same pair once more makes the next one a relay.
  std::atomic<uint32_t> cand_waiter{0}, cand_signaller{0};
  std::atomic<uint8_t> flags{0};
};
static_assert(sizeof(Slot) == 64);

Slot g_slots[kSlots];
std::atomic<bool> g_on{false};

thread_local constinit uint32_t t_tid __attribute__((tls_model("initial-exec"))) = 0;
// The signaller of this thread's last long asymmetric semaphore wait: the
// same producer once more makes the next one a relay (semaphores are often
// made per wait, as Python's Condition.wait does, so history is per thread).
thread_local constinit uint32_t t_last_sem_producer __attribute__((tls_model("initial-exec"))) = 0;

uint32_t my_tid() noexcept {
  if (__builtin_expect(t_tid == 0, 0)) t_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return t_tid;
}

Slot& slot_of(const void* obj) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(obj);
  return g_slots[((a >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits)];
}

void clear(Slot& s, uintptr_t obj) noexcept {
  s.signal_tick.store(0, std::memory_order_relaxed);
  s.signal_tid.store(0, std::memory_order_relaxed);
  for (auto& w : s.waiters) w.store(0, std::memory_order_relaxed);
  for (auto& w : s.signallers) w.store(0, std::memory_order_relaxed);
  s.cand_waiter.store(0, std::memory_order_relaxed);
  s.cand_signaller.store(0, std::memory_order_relaxed);
  s.flags.store(0, std::memory_order_relaxed);
  s.obj.store(obj, std::memory_order_relaxed);
}

// The object's slot, taken over from an older object if need be.
Slot& claim(const void* obj) noexcept {
  Slot& s = slot_of(obj);
  const auto a = reinterpret_cast<uintptr_t>(obj);
  if (s.obj.load(std::memory_order_relaxed) != a) clear(s, a);
  return s;
}

bool listed(const std::atomic<uint32_t> (&list)[2], uint32_t tid) noexcept {
  return list[0].load(std::memory_order_relaxed) == tid ||
         list[1].load(std::memory_order_relaxed) == tid;
}

void add(std::atomic<uint32_t> (&list)[2], uint32_t tid, Slot& s, uint8_t more) noexcept {
  if (listed(list, tid)) return;
  for (auto& e : list) {
    uint32_t empty = 0;
    if (e.load(std::memory_order_relaxed) == 0 &&
        e.compare_exchange_strong(empty, tid, std::memory_order_relaxed)) {
      return;
    }
  }
  if (!(s.flags.load(std::memory_order_relaxed) & more)) {
    s.flags.fetch_or(more, std::memory_order_relaxed);
  }
}

// Notes `tid` as a waiter; true when the object is (now) symmetric.
bool note_waiter(Slot& s, uint32_t tid) noexcept {
  if (s.flags.load(std::memory_order_relaxed) & kSymmetric) return true;
  if (listed(s.signallers, tid)) {
    s.flags.fetch_or(kSymmetric, std::memory_order_relaxed);
    return true;
  }
  add(s.waiters, tid, s, kMoreWaiters);
  return false;
}

bool entered_user_thread() noexcept {
  Guard guard;
  return guard.entered();
}

uint32_t relay_name(SyncKind kind) {
  static const uint32_t cond =
      stallscope_name_intern("relay: condition variable signalled by a producer thread");
  static const uint32_t sem =
      stallscope_name_intern("relay: semaphore posted by a producer thread");
  return kind == SyncKind::kCond ? cond : sem;
}

// The hand-off and its data wait, with cancellation held off (the recorder
// is no place to unwind from) and errno kept.
void record_relay(const SyncWait& w, uint32_t producer, uint64_t put, uint64_t t1) noexcept {
  Guard guard;
  if (!guard.entered()) return;
  const int saved = errno;
  int cancel = 0;
  ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
  ChannelHandoff h;
  h.channel_id = reinterpret_cast<uintptr_t>(w.obj);
  h.type = w.kind == SyncKind::kCond ? format::ChannelType::kCondVar
                                     : format::ChannelType::kSemaphore;
  h.producer_pid = h.consumer_pid = static_cast<uint32_t>(recorded_pid());
  h.producer_tid = producer;
  h.consumer_tid = my_tid();
  h.parts = 1;
  h.requested = w.t0;
  record_channel_handoff(put, t1, h);
  format::WorkExt e{};
  e.h.type = static_cast<uint8_t>(format::Ext::kWork);
  e.h.bytes = sizeof e;
  e.h.aux = static_cast<uint32_t>(format::WaitSource::kRelay);
  stallscope_event_record(STALLSCOPE_DATA_WAIT, relay_name(w.kind), w.t0, t1, 0, &e, sizeof e);
  ::pthread_setcancelstate(cancel, &cancel);
  errno = saved;
}

// A long asymmetric wait is a relay the second time its pair is seen (the
// first wake-ups of a lock or of the GIL come before the object is known
// to be symmetric).
bool confirmed(Slot& s, const SyncWait& w, uint32_t me, uint32_t producer) noexcept {
  if (w.kind == SyncKind::kSem) {
    const bool again = t_last_sem_producer == producer;
    t_last_sem_producer = producer;
    return again;
  }
  if (s.cand_waiter.load(std::memory_order_relaxed) == me &&
      s.cand_signaller.load(std::memory_order_relaxed) == producer) {
    return true;
  }
  s.cand_waiter.store(me, std::memory_order_relaxed);
  s.cand_signaller.store(producer, std::memory_order_relaxed);
  return false;
}

}  // namespace

void relays_init() noexcept { g_on.store(config().relays, std::memory_order_relaxed); }

void relays_after_fork() noexcept {
  t_tid = 0;
  t_last_sem_producer = 0;
}

SyncWait relay_wait_begin(const void* obj, SyncKind kind) noexcept {
  if (!g_on.load(std::memory_order_relaxed) || !entered_user_thread()) return {};
  if (note_waiter(claim(obj), my_tid())) return {};
  return SyncWait{obj, ticks_now(), kind};
}

void relay_wait_end(const SyncWait& w) noexcept {
  if (w.t0 == 0) return;
  const uint64_t t1 = ticks_now();
  Slot& s = slot_of(w.obj);
  if (s.obj.load(std::memory_order_relaxed) != reinterpret_cast<uintptr_t>(w.obj) ||
      (s.flags.load(std::memory_order_relaxed) & kSymmetric)) {
    return;
  }
  const uint32_t producer = s.signal_tid.load(std::memory_order_relaxed);
  const uint64_t put = s.signal_tick.load(std::memory_order_relaxed);
  const uint32_t me = my_tid();
  if (producer == 0 || producer == me || put < w.t0 || put > t1) return;
  const auto ns = static_cast<double>(t1 - w.t0) * ns_per_tick();
  if (ns < static_cast<double>(config().wait_min_ns)) return;
  if (!confirmed(s, w, me, producer)) return;
  // A thread's first record creates its trace buffer (an allocation). A
  // condition variable's wait returns holding the caller's mutex, which may
  // be an allocator's own (jemalloc's and tcmalloc's background threads
  // wait on condition variables): only the process's main thread — the
  // trainer of a C program with a loader thread — may allocate here;
  // another thread without a buffer records nothing.
  if (stallscope_inline_v1_thread_buffer == nullptr &&
      me != static_cast<uint32_t>(recorded_pid()))
    return;
  record_relay(w, producer, put, t1);
}

void relay_try(const void* obj) noexcept {
  if (!g_on.load(std::memory_order_relaxed) || !entered_user_thread()) return;
  note_waiter(claim(obj), my_tid());
}

void relay_signal(const void* obj) noexcept {
  if (!g_on.load(std::memory_order_relaxed) || !entered_user_thread()) return;
  Slot& s = claim(obj);
  if (s.flags.load(std::memory_order_relaxed) & kSymmetric) return;
  const uint32_t tid = my_tid();
  if (listed(s.waiters, tid)) {
    s.flags.fetch_or(kSymmetric, std::memory_order_relaxed);
    return;
  }
  add(s.signallers, tid, s, kMoreSignallers);
  // The tick before the thread id: a waiter that reads the new id with the
  // old tick sees a signal before its wait and records nothing.
  s.signal_tick.store(ticks_now(), std::memory_order_relaxed);
  if (s.signal_tid.load(std::memory_order_relaxed) != tid) {
    s.signal_tid.store(tid, std::memory_order_relaxed);
  }
}

void relay_forget(const void* obj) noexcept {
  if (!g_on.load(std::memory_order_relaxed)) return;
  Slot& s = slot_of(obj);
  if (s.obj.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(obj)) clear(s, 0);
}

}  // namespace stallscope::preload
