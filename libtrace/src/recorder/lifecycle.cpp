// Process lifecycle: the file is completed at normal exit and _exit (and at
// SIGTERM, SIGINT, SIGHUP and SIGQUIT: signals.cpp); a fork child gets its own recorder and
// file (RELIABILITY.md 3, 12, 13); before an exec the file is completed and,
// should the exec fail, reopened (14, 42: the exec entries below).
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "recorder/recorder.hpp"
#include "stallscope/internal/shim_abi.hpp"
#include "stallscope/trace.h"

namespace stallscope::detail {
namespace {

constexpr int kExitFlushMs = 1000;

// fork: the child must not inherit a registry mid-update.
void before_fork() { recorder().registry.mutex().lock(); }
void after_fork_parent() {
  Recorder& r = recorder();
  r.registry.mutex().unlock();
  // The new child (a data worker, most likely) is sampled from the next tick.
  if (sys::CpuSampler* s = r.live_sampler.load(std::memory_order_acquire)) s->request_relist();
}
void after_fork_child() {
  // Single-threaded: the parent's registry lock is held by this thread in
  // the abandoned object; the child's recorder starts fresh and lazily.
  State parent_state = recorder().state.load();
  replace_recorder_after_fork();
  if (parent_state == State::kFailed || parent_state == State::kClosed) {
    recorder().state.store(parent_state);
    g_capture.store(false, std::memory_order_relaxed);
  }
}

void on_exit_hook() { close_recorder(); }

// _exit skips atexit handlers: complete the file here unless this is a
// vfork child (pid differs from the recorder's), which must not touch it.
void before_immediate_exit() noexcept {
  Recorder& r = recorder();
  if (r.state.load() != State::kRunning || r.pid != ::getpid()) return;
  request_flush_and_wait(true, kExitFlushMs);
}

}  // namespace

void install_process_hooks() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(on_exit_hook);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    install_signal_handlers();
  });
}

}  // namespace stallscope::detail

extern "C" STALLSCOPE_API int stallscope_internal_v1_exec_seal(void) noexcept {
  return stallscope::detail::seal_for_exec() ? 1 : 0;
}

extern "C" STALLSCOPE_API void stallscope_internal_v1_exec_unseal(void) noexcept {
  stallscope::detail::unseal_after_exec();
}

// Interposes libc's _exit/_Exit for programs that link the recorder (and
// for the preload shim): flush, then end the process as libc would.
extern "C" STALLSCOPE_API void _exit(int status) {
  stallscope::detail::before_immediate_exit();
  for (;;) ::syscall(SYS_exit_group, status);
}

extern "C" STALLSCOPE_API void _Exit(int status) {
  stallscope::detail::before_immediate_exit();
  for (;;) ::syscall(SYS_exit_group, status);
}
