// Relays: data handed from one thread to another through a condition
// variable or a semaphore (a helper thread receives the batch, the trainer
// waits to be woken). A wait that lasted at least wait_min and was ended by
// another thread's signal or post within it is a channel_handoff
// (kCondVar, kSemaphore) and a data wait (WaitSource::kRelay) — unless the
// object is symmetric: some thread both waits on it and signals it (a lock,
// Python's GIL condition variables), so its wake-ups carry no data
// (docs/attach-preload.md, "Hand-offs").
//
// These calls run inside allocators, under the GIL, while a caller holds
// its mutex, and before the shim's constructor: the per-call paths take no
// lock, allocate nothing and make no system call but a thread's first
// gettid. State lives in a process-private direct-mapped table hashed by
// the object's address (a newer object may evict an older one: its next
// wait is then judged on less history). All atomics are relaxed: a race
// costs at most one misjudged wait, never memory safety.
#pragma once

#include <cstdint>

namespace stallscope::preload {

enum class SyncKind : uint8_t { kCond = 1, kSem = 2 };

// What a wait remembers between its start and its end (trivial; t0 == 0:
// nothing to judge at the end).
struct SyncWait {
  const void* obj = nullptr;
  uint64_t t0 = 0;
  SyncKind kind = SyncKind::kCond;
};

// Turns the relay tracking on (constructor, after the configuration).
void relays_init() noexcept;
// Before a blocking wait on `obj`.
SyncWait relay_wait_begin(const void* obj, SyncKind kind) noexcept;
// After a wait that returned woken (not timed out, no error).
void relay_wait_end(const SyncWait& w) noexcept;
// A non-blocking acquire (sem_trywait): the caller counts as a waiter.
void relay_try(const void* obj) noexcept;
// A signal, broadcast or post on `obj`.
void relay_signal(const void* obj) noexcept;
// init/destroy: a new object at this address starts without history.
void relay_forget(const void* obj) noexcept;
// Fork child: the cached thread id is the parent's.
void relays_after_fork() noexcept;

}  // namespace stallscope::preload
