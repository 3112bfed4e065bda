// Shim start: configuration, the follow policy for this very program, the
// channel board, the injection variables, and the recorder. Calls made
// before this constructor ran (constructors of other libraries) pass
// through untraced (RELIABILITY.md 9).
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "channels.hpp"
#include "direct_read.hpp"
#include "env_policy.hpp"
#include "exec_check.hpp"
#include "fault_sampler.hpp"
#include "messages.hpp"
#include "native_stacks.hpp"
#include "relays.hpp"
#include "shim.hpp"
#include "socket_reads.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/trace.h"

extern "C" char* program_invocation_short_name;

namespace stallscope::preload {

void resolve_recorder_exit() noexcept;

namespace {

// The shim's directory (libstallscope_cuda.so is next to it). A plain
// array: constructors may run before a std::string's initializer.
char g_dir[4096];

void find_own_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&find_own_path), &info) == 0 || info.dli_fname == nullptr) {
    return;
  }
  char real[4096];
  const char* path = ::realpath(info.dli_fname, real) != nullptr ? real : info.dli_fname;
  set_shim_path(path);
  const size_t n = std::min(std::strlen(path), sizeof g_dir - 1);
  std::memcpy(g_dir, path, n);
  g_dir[n] = '\0';
  if (char* slash = std::strrchr(g_dir, '/')) *slash = '\0';
}

// Sets `var` to `value` unless set; an existing value is reported (it may
// be another tool holding the slot) and kept.
void claim_env(const char* var, const std::string& value) {
  const char* cur = std::getenv(var);
  if (cur == nullptr || *cur == '\0') {
    ::setenv(var, value.c_str(), 1);
  } else if (std::strstr(cur, "stallscope") == nullptr) {
    const std::string note = std::string(var) + " is already set to " + cur +
                             "; stallscope leaves it (its events may be missing)";
    shim_note(note.c_str());
    stallscope_mark(note.c_str());
  }
}

void claim_injection() {
  claim_env("NVTX_INJECTION64_PATH", shim_path());
  claim_env("CUDA_INJECTION64_PATH", shim_path());
  const std::string cuda = std::string(g_dir) + "/libstallscope_cuda.so";
  if (::access(cuda.c_str(), R_OK) == 0) claim_env("NCCL_PROFILER_PLUGIN", cuda);
}

void after_fork_child_handler() {
  set_recorded_pid(static_cast<pid_t>(::syscall(SYS_getpid)));
  channels_reset_tid_after_fork();
  messages_after_fork();
  relays_after_fork();
  socket_reads_after_fork();
  fault_sampler_forget_after_fork();
  native_stacks_forget_after_fork();
}

// The exiting thread's message in progress (messages.hpp), and what vfork
// children left to record (exec_check.hpp).
void flush_at_exit() {
  channel_flush_thread();
  if (!in_foreign_process()) record_child_notes();
}

__attribute__((constructor)) void shim_constructor() {
  set_recorded_pid(static_cast<pid_t>(::syscall(SYS_getpid)));
  load_shim_config();
  find_own_path();
  if (excluded_program(program_invocation_short_name)) {
    scrub_own_env();  // nor is anything it starts
    return;
  }
  channels_init();
  resolve_recorder_exit();
  ::pthread_atfork(nullptr, nullptr, after_fork_child_handler);
  (void)ns_per_tick();  // calibrated now, not inside a traced call
  socket_reads_init();
  claim_injection();
  direct_reads_init();
  {
    Guard guard;  // the recorder's start-up calls are not traced
    stallscope_init();
    fault_sampler_arm();
    native_stacks_start();
  }
  // After the recorder's own handler, so run before it closes the file.
  std::atexit(flush_at_exit);
  relays_init();
  g_active.store(true, std::memory_order_release);
}

}  // namespace

void shim_after_fork_child() noexcept {
  after_fork_child_handler();
  if (!g_active.load(std::memory_order_relaxed)) return;
  Guard guard;
  stallscope_init();  // the child's own file, and its sampler, from now
  fault_sampler_after_fork_child();
  native_stacks_after_fork_child();
}

const char* shim_dir() noexcept { return g_dir; }

}  // namespace stallscope::preload
