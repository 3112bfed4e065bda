// sigaction and signal: the recorder keeps its SIGTERM/SIGINT/SIGHUP/SIGQUIT
// handler (the file is completed before the default action ends the
// process) while the program sees and sets its own disposition as if
// stallscope were not there. Python reads SIGINT's disposition at start-up and installs its
// KeyboardInterrupt handler only over SIG_DFL; multiprocessing's forkserver
// restores the handlers it read. Every other signal goes straight to libc.
#include <signal.h>

#include "real.hpp"
#include "shim.hpp"
#include "stallscope/internal/shim_abi.hpp"

extern "C" int __sigaction(int sig, const struct sigaction* act, struct sigaction* old);

namespace {

STALLSCOPE_REAL(sigaction, nullptr);
STALLSCOPE_REAL(signal, nullptr);

// A vfork child shares the parent's memory but not its handlers: what it
// sets must not change the parent's record of them.
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (stallscope::preload::in_foreign_process()) return 1;
  return stallscope_internal_v1_program_sigaction(sig, act, old);
}

// signal() through sigaction, as glibc does it: BSD semantics (the handler
// stays, interrupted calls restart, the signal is blocked while it runs),
// or System V semantics (one delivery, not blocked).
sighandler_t signal_with(int sig, sighandler_t handler, int flags, bool* handled) {
  struct sigaction act {}, old {};
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (!(flags & SA_NODEFER)) sigaddset(&act.sa_mask, sig);
  const int rc = program_sigaction(sig, &act, &old);
  *handled = rc != 1;
  if (rc != 0) return SIG_ERR;
  // sa_handler and sa_sigaction share storage: either is the old handler.
  return old.sa_handler;
}

}  // namespace

#define EXPORT STALLSCOPE_SHIM_EXPORT

EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  const int rc = program_sigaction(sig, act, old);
  if (rc != 1) return rc;
  auto real = real_sigaction.get();
  return real != nullptr ? real(sig, act, old) : __sigaction(sig, act, old);
}

EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  bool handled = false;
  const sighandler_t old = signal_with(sig, handler, SA_RESTART, &handled);
  if (handled) return old;
  auto real = real_signal.get();
  return real != nullptr ? real(sig, handler) : SIG_ERR;
}

EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept { return signal(sig, handler); }

EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  bool handled = false;
  const sighandler_t old = signal_with(sig, handler, SA_RESETHAND | SA_NODEFER, &handled);
  if (handled) return old;
  struct sigaction act {}, prev {};
  act.sa_handler = handler;
  act.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&act.sa_mask);
  return sigaction(sig, &act, &prev) == 0 ? prev.sa_handler : SIG_ERR;
}

EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return __sysv_signal(sig, handler);
}
