// The recorder's SIGTERM/SIGINT/SIGHUP/SIGQUIT handlers (signals.cpp), and
// the entry the preload shim's sigaction/signal wrappers call.
#pragma once

#include <signal.h>

namespace stallscope::detail {

// Installs the handlers that complete the file before the default action
// ends the process, in front of what the program had.
void install_signal_handlers();

// The program's own disposition of those four signals (shim_abi.hpp's
// stallscope_internal_v1_program_sigaction, the entry the preload shim's
// sigaction/signal wrappers call, is this function).
int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept;

}  // namespace stallscope::detail
