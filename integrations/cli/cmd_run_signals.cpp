// Signals sent to `stallscope run`. They arrive through a signalfd, so the
// supervision loop handles them in order and no handler runs in the middle
// of a report. INT/TERM/HUP/QUIT are passed on to the trainer: a signal sent
// by a process (kill, a batch system) is forwarded, while one the terminal
// generated (^C, ^\) is not, because the terminal already delivered it to the
// whole foreground process group, trainer included. SIGUSR2 toggles capture
// and never reaches the trainer, whose own handlers stay untouched.
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "cmd_run.hpp"

namespace stallscope::cli::run {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

bool is_forwarded(int sig) {
  for (int s : kForwarded)
    if (s == sig) return true;
  return false;
}

}  // namespace

int open_signal_fd(sigset_t* old_mask) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwarded) sigaddset(&set, s);
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &set, old_mask) != 0) return -errno;
  const int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  return fd >= 0 ? fd : -errno;
}

SignalAction handle_signal(int sfd, pid_t child) {
  signalfd_siginfo si{};
  if (::read(sfd, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) return SignalAction::kNone;
  const int sig = static_cast<int>(si.ssi_signo);
  if (sig == SIGCHLD) return SignalAction::kChildChanged;
  if (sig == SIGUSR2) return SignalAction::kToggleCapture;
  if (!is_forwarded(sig)) return SignalAction::kNone;
  // SI_KERNEL: from the terminal driver, already delivered to the group.
  if (si.ssi_code == SI_KERNEL) return SignalAction::kNone;
  if (child > 0) ::kill(child, sig);
  return SignalAction::kForwarded;
}

}  // namespace stallscope::cli::run
