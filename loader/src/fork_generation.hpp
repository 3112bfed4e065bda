// How many times this process has been forked into, from the child's side:
// a reader compares the generation it was set up in with the current one
// to know it runs in a forked child and must make its own ring or threads,
// without a getpid() system call (~0.2 us on a VM) on every submit and reap.
// The count moves in a pthread_atfork child handler, registered on first
// use: fork(2) through glibc runs it; a raw clone(2) that goes on running
// this process's code (no exec) does not, and is not supported.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace stallscope::loader::detail {

inline std::atomic<uint64_t> g_fork_generation{0};

inline void bump_fork_generation() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}

// The current generation; the first call registers the handler.
inline uint64_t fork_generation() noexcept {
  static const bool registered = ::pthread_atfork(nullptr, nullptr, bump_fork_generation) == 0;
  (void)registered;
  return g_fork_generation.load(std::memory_order_relaxed);
}

}  // namespace stallscope::loader::detail
