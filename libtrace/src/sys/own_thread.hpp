// Starts one of stallscope's own threads (flusher, sampler) the way a
// guest in someone else's process should (RELIABILITY.md 39, 40): a small
// stack instead of the 8 MiB default (ulimit -s), every signal blocked from
// its first instruction, and no exception — pthread_create, not
// std::thread, whose start allocates on the new thread (and whose failure
// throws).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstddef>

namespace stallscope::sys {

// Enough for a flush, a /proc read and a GPU source's capture hook; the
// static TLS of the process comes out of it too.
inline constexpr size_t kOwnThreadStackBytes = 512u << 10;

// Returns 0, or pthread_create's error (EAGAIN: a process or thread limit,
// RLIMIT_NPROC or the cgroup's pids.max).
inline int start_own_thread(pthread_t* thread, void* (*fn)(void*), void* arg) noexcept {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  int err = pthread_attr_init(&attr);
  if (err == 0) {
    pthread_attr_setstacksize(&attr, kOwnThreadStackBytes);
    err = pthread_create(thread, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    // A large static TLS (many libraries) may not fit: the default size.
    if (err == EINVAL) err = pthread_create(thread, nullptr, fn, arg);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

}  // namespace stallscope::sys
