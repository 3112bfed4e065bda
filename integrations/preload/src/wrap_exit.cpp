// _exit/_Exit: the recorder completes the file on these (its own
// interposers in libstallscope_trace.so), but under LD_PRELOAD the
// recorder library comes after libc in the symbol search order, so the
// shim exports them and calls the recorder's versions (which do nothing in
// a vfork child), after recording the notes vfork children left.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "exec_check.hpp"
#include "shim.hpp"
#include "stallscope/trace.h"

namespace {

using ExitFn = void (*)(int);
ExitFn g_exit = nullptr;
ExitFn g_Exit = nullptr;

[[noreturn]] void exit_group(int status) {
  for (;;) ::syscall(SYS_exit_group, status);
}

}  // namespace

namespace stallscope::preload {

// Finds the recorder's _exit/_Exit (constructor time: no dlopen at exit).
void resolve_recorder_exit() noexcept {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&stallscope_init), &info) == 0) return;
  void* lib = ::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return;
  g_exit = reinterpret_cast<ExitFn>(::dlsym(lib, "_exit"));
  g_Exit = reinterpret_cast<ExitFn>(::dlsym(lib, "_Exit"));
}

}  // namespace stallscope::preload

// What vfork children left to record goes in first (not from a vfork child
// itself: it calls _exit after a failed exec).
STALLSCOPE_SHIM_EXPORT void _exit(int status) {
  if (!stallscope::preload::in_foreign_process()) stallscope::preload::record_child_notes();
  if (g_exit != nullptr) g_exit(status);
  exit_group(status);
}

STALLSCOPE_SHIM_EXPORT void _Exit(int status) {
  if (!stallscope::preload::in_foreign_process()) stallscope::preload::record_child_notes();
  if (g_Exit != nullptr) g_Exit(status);
  exit_group(status);
}
