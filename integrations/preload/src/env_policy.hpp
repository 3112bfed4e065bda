// Which child programs are traced, and the environment they get.
// STALLSCOPE_FOLLOW=children (default) traces exec'd and spawned programs
// except compilers and system tools (kExcludedPrograms, documented in
// docs/attach-preload.md); STALLSCOPE_FOLLOW=none traces none. A child that
// is not followed gets an environment without the shim: LD_PRELOAD entries
// naming it and injection variables (NVTX_INJECTION64_PATH,
// CUDA_INJECTION64_PATH, NCCL_PROFILER_PLUGIN) pointing to stallscope are
// removed. A followed child whose caller passed its own environment gets
// the shim's variables back (posix_spawn children exec inside libc, out of
// the shim's reach).
#pragma once

namespace stallscope::preload {

// Program names (basenames) never traced.
extern const char* const kExcludedPrograms[];

// True when `path` (a program path or name) is a compiler or system tool.
bool excluded_program(const char* path) noexcept;
// Whether a child running `path` is traced.
bool follow_child(const char* path) noexcept;
// The environment for a child: `envp` adjusted as above. Returns a
// malloc'd array (strings may be shared with envp or newly allocated), or
// `envp` itself when nothing changes or memory is short. Never call in a
// vfork child.
char** child_env(char* const* envp, bool follow) noexcept;
// Frees what child_env allocated (after a failed exec, or a spawn).
void free_child_env(char** env, char* const* envp) noexcept;
// Removes the shim from this process's own environment (an excluded
// program, so that what it starts is not traced either).
void scrub_own_env() noexcept;
// Absolute path of the shim (found with dladdr at start).
const char* shim_path() noexcept;
void set_shim_path(const char* path) noexcept;

}  // namespace stallscope::preload
