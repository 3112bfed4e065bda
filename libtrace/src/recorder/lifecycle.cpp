// Process lifecycle: the file is completed at normal exit, SIGTERM, SIGINT
// and _exit; a fork child gets its own recorder and file (RELIABILITY.md 3,
// 12, 13). Signal handlers only ask the flusher thread to flush and wait a
// bounded time — nothing async-signal-unsafe runs in them — then chain to
// the program's own handler or the default action.
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "recorder/recorder.hpp"
#include "stallscope/trace.h"

namespace stallscope::detail {
namespace {

constexpr int kSignalFlushMs = 1000;
constexpr int kSignals[] = {SIGTERM, SIGINT};
struct sigaction g_prev[NSIG];

bool is_default(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}
bool is_ignored(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN;
}

void on_signal(int sig, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  const struct sigaction& prev = g_prev[sig];
  // The default action ends the process: complete the file first.
  request_flush_and_wait(is_default(prev), kSignalFlushMs);
  if (is_default(prev)) {
    signal(sig, SIG_DFL);
    raise(sig);  // delivered when this handler returns
  } else if (prev.sa_flags & SA_SIGINFO) {
    prev.sa_sigaction(sig, info, uctx);
  } else if (!is_ignored(prev)) {
    prev.sa_handler(sig);
  }
  errno = saved_errno;
}

void install_signal_handlers() {
  for (int sig : kSignals) {
    struct sigaction prev{};
    if (sigaction(sig, nullptr, &prev) != 0 || is_ignored(prev)) continue;  // keep SIG_IGN
    g_prev[sig] = prev;
    struct sigaction sa{};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | (prev.sa_flags & SA_ONSTACK);
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

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
  request_flush_and_wait(true, kSignalFlushMs);
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
