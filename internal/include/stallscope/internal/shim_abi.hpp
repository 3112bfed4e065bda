// Version 1 of the calls the preload shim makes into the recorder that are
// not the public API (internal: not installed, not for users). They are C
// symbols with the version in their name, exported by libstallscope_trace
// beside the public C API, so the recorder exports nothing of its C++
// internals. A changed contract gets a new name (…_v2_…), never a changed
// meaning under the old one. The inline record layout is in
// inline_records.hpp.
#pragma once

#include <signal.h>

#include "stallscope/trace.h"  // STALLSCOPE_API

extern "C" {

// The program's view of SIGTERM/SIGINT/SIGHUP/SIGQUIT once the recorder's
// handlers are installed: the program's own disposition is kept aside and
// read back as the program set it, while the recorder's handler stays in
// front and chains to it. Returns 1 for any other signal (the caller makes
// the real call), 0 when done, -1 with errno set when libc refused.
// Async-signal-safe.
STALLSCOPE_API int stallscope_internal_v1_program_sigaction(int sig, const struct sigaction* act,
                                                            struct sigaction* old) noexcept;

// Before the program's exec: this process's trace file is completed (its
// End chunk written) while recording goes on; returns 1, or 0 when there
// is no file to complete (tracing off, failed, a vfork child). After a
// failed exec, exec_unseal takes the End chunk back and the same file goes
// on. Not async-signal-safe; never in a vfork child.
STALLSCOPE_API int stallscope_internal_v1_exec_seal(void) noexcept;
STALLSCOPE_API void stallscope_internal_v1_exec_unseal(void) noexcept;

}  // extern "C"
