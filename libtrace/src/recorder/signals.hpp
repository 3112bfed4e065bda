// The recorder's SIGTERM/SIGINT/SIGHUP/SIGQUIT handlers (signals.cpp), and
// the entry the preload shim's sigaction/signal wrappers call.
#pragma once

#include <signal.h>

#include "stallscope/trace.h"  // STALLSCOPE_API

namespace stallscope::detail {

// Installs the handlers that complete the file before the default action
// ends the process, in front of what the program had.
void install_signal_handlers();

// Once the handlers are installed, the program's own disposition of those
// four signals is kept aside and read back as the program set it, while
// the recorder's handler stays in front and chains to it. Returns 1 for any
// other signal (the caller makes the real call), 0 when done, -1 with errno
// set when libc refused. Async-signal-safe.
STALLSCOPE_API int program_sigaction(int sig, const struct sigaction* act,
                                     struct sigaction* old) noexcept;

}  // namespace stallscope::detail
