// fork, posix_spawn and exec. A fork child gets its own trace file (the
// recorder's fork handler) and starts recording at once so that its CPU use
// is sampled. Exec and spawn pass the child the environment the follow
// policy asks for, and say so when the program cannot be traced (static,
// set-id, file capabilities: exec_check.hpp). Exec completes this process's
// file first but keeps recording: a failed exec (ENOENT, EACCES, E2BIG,
// ENOEXEC …) takes the completion back and the process goes on traced in
// the same file (RELIABILITY.md 14, 42). In a vfork child (pid differs from
// the recorded one) the exec wrappers only check the target and call
// through: nothing may be allocated, locked or recorded there.
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "env_policy.hpp"
#include "exec_check.hpp"
#include "real.hpp"
#include "shim.hpp"
#include "stallscope/internal/config.hpp"
#include "stallscope/internal/shim_abi.hpp"
#include "stallscope/trace.h"

extern char** environ;

namespace pl = stallscope::preload;

namespace {

STALLSCOPE_REAL(fork, nullptr);
STALLSCOPE_REAL(posix_spawn, nullptr);
STALLSCOPE_REAL(posix_spawnp, nullptr);
STALLSCOPE_REAL(execve, nullptr);
STALLSCOPE_REAL(execvpe, nullptr);
STALLSCOPE_REAL(fexecve, nullptr);
STALLSCOPE_REAL(execveat, nullptr);

// STALLSCOPE_QUIET is read (a function-local static: a guard, a lock the
// first time) before any vfork child could be the first to ask.
__attribute__((constructor)) void read_quiet_early() { (void)stallscope::config::quiet(); }

// A followed child that cannot be traced: one line on stderr, and a mark in
// this process's trace, which the report shows as a warning, so that the
// parent is never analysed as if it were the whole story (RELIABILITY.md
// 45). A vfork child (`!record`) leaves the mark to its parent. Stack
// buffers only.
void note_untraceable(const char* verb, const char* shown, const pl::ExecTarget& target,
                      bool record) noexcept {
  char interp[256];
  const pl::Untraceable why = pl::check_exec_target(target, interp, sizeof interp);
  if (why == pl::Untraceable::kNo) return;
  char text[pl::kChildNoteBytes];
  pl::untraceable_text(text, sizeof text, verb, shown, interp, why);
  pl::shim_note(text);
  if (!record) {
    pl::leave_child_note(text);
    return;
  }
  pl::Guard guard;  // the recorder's own calls are not traced
  stallscope_mark(text);
}

// The recorder's file is completed before the image is replaced, and
// recording goes on meanwhile. The new image records under the same pid, so
// the recorder gives it the next free name (<base>.<N>.sst); this image's
// file is never moved or touched again. A failed exec reopens it.
bool before_exec() noexcept {
  pl::Guard guard;
  return stallscope_internal_v1_exec_seal() != 0;
}

void after_failed_exec(bool sealed) noexcept {
  if (!sealed) return;
  pl::Guard guard;
  stallscope_internal_v1_exec_unseal();
}

// Notes of vfork children (exec_check.hpp). States: 0 free, 1 being
// written (by a child), 2 ready, 3 being recorded (by the parent).
struct ChildNote {
  std::atomic<uint32_t> state{0};
  char text[pl::kChildNoteBytes];
};
constexpr int kChildNotes = 8;
ChildNote g_child_notes[kChildNotes];
std::atomic<uint32_t> g_child_notes_ready{0};

template <typename Exec>
int exec_with(const pl::ExecTarget& target, const char* shown, char* const* envp, Exec call) {
  const bool follow = pl::follow_child(shown);
  if (pl::in_foreign_process()) {  // a vfork child: check, say, call through
    if (follow) note_untraceable("exec", shown, target, false);
    return call(envp);
  }
  char** env = pl::child_env(envp, follow);
  pl::record_child_notes();
  if (follow) note_untraceable("exec", shown, target, true);
  const bool sealed = before_exec();
  const int r = call(env);
  const int saved = errno;
  after_failed_exec(sealed);
  pl::free_child_env(env, envp);
  errno = saved;
  return r;
}

template <typename Spawn>
int spawn_with(const pl::ExecTarget& target, char* const* envp, Spawn call) {
  if (pl::in_foreign_process()) return call(envp);
  const bool follow = pl::follow_child(target.path);
  char** env = pl::child_env(envp, follow);
  pl::record_child_notes();
  if (follow) note_untraceable("spawn", target.path, target, true);
  const int r = call(env);
  pl::free_child_env(env, envp);
  return r;
}

pl::ExecTarget path_target(const char* path, bool search = false) {
  pl::ExecTarget t;
  t.path = path;
  t.search = search;
  return t;
}

// execl* argument lists into an argv array on the stack.
#define COLLECT_ARGS(arg0, ap, argv, extra)                              \
  size_t argc = 1;                                                       \
  va_start(ap, arg0);                                                    \
  while (va_arg(ap, char*) != nullptr) ++argc;                           \
  va_end(ap);                                                            \
  char** argv = static_cast<char**>(__builtin_alloca((argc + 1) * sizeof(char*))); \
  va_start(ap, arg0);                                                    \
  argv[0] = const_cast<char*>(arg0);                                     \
  for (size_t i = 1; i <= argc; ++i) argv[i] = va_arg(ap, char*);        \
  extra;                                                                 \
  va_end(ap)

}  // namespace

namespace stallscope::preload {

void leave_child_note(const char* text) noexcept {
  for (ChildNote& n : g_child_notes) {
    uint32_t free = 0;
    if (!n.state.compare_exchange_strong(free, 1, std::memory_order_acquire)) continue;
    const size_t len = std::min(std::strlen(text), sizeof n.text - 1);
    std::memcpy(n.text, text, len);
    n.text[len] = '\0';
    n.state.store(2, std::memory_order_release);
    g_child_notes_ready.fetch_add(1, std::memory_order_release);
    return;
  }
}

void record_child_notes() noexcept {
  if (g_child_notes_ready.load(std::memory_order_acquire) == 0) return;
  const int saved = errno;
  for (ChildNote& n : g_child_notes) {
    uint32_t ready = 2;
    if (!n.state.compare_exchange_strong(ready, 3, std::memory_order_acquire)) continue;
    {
      Guard guard;
      stallscope_mark(n.text);
    }
    g_child_notes_ready.fetch_sub(1, std::memory_order_relaxed);
    n.state.store(0, std::memory_order_release);
  }
  errno = saved;
}

void forget_child_notes() noexcept {
  for (ChildNote& n : g_child_notes) n.state.store(0, std::memory_order_relaxed);
  g_child_notes_ready.store(0, std::memory_order_relaxed);
}

}  // namespace stallscope::preload

#define EXPORT STALLSCOPE_SHIM_EXPORT

EXPORT pid_t fork() {
  pl::record_child_notes();  // into this process's file, before a child copies them
  const pid_t pid = real_fork.get()();
  if (pid == 0) {
    pl::forget_child_notes();
    pl::shim_after_fork_child();
  }
  return pid;
}

EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return spawn_with(path_target(path), envp, [&](char* const* env) {
    return real_posix_spawn.get()(pid, path, fa, attr, argv, env);
  });
}
EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return spawn_with(path_target(file, true), envp, [&](char* const* env) {
    return real_posix_spawnp.get()(pid, file, fa, attr, argv, env);
  });
}

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return exec_with(path_target(path), path, envp, [&](char* const* env) {
    return real_execve.get()(path, argv, env);
  });
}
EXPORT int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }
EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_with(path_target(file, true), file, envp, [&](char* const* env) {
    return real_execvpe.get()(file, argv, env);
  });
}
EXPORT int execvp(const char* file, char* const argv[]) { return execvpe(file, argv, environ); }
EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  const char* name = argv[0];  // argv is never null (glibc declares it nonnull)
  pl::ExecTarget target;
  target.fd = fd;
  target.path = name;
  return exec_with(target, name, envp, [&](char* const* env) {
    return real_fexecve.get()(fd, argv, env);
  });
}
EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                    int flags) {
  pl::ExecTarget target = path_target(path);
  target.dirfd = dirfd;
  target.at_flags = flags;
  return exec_with(target, path, envp, [&](char* const* env) {
    return real_execveat.get()(dirfd, path, argv, env, flags);
  });
}

EXPORT int execl(const char* path, const char* arg0, ...) {
  va_list ap;
  COLLECT_ARGS(arg0, ap, argv, (void)0);
  return execve(path, argv, environ);
}
EXPORT int execlp(const char* file, const char* arg0, ...) {
  va_list ap;
  COLLECT_ARGS(arg0, ap, argv, (void)0);
  return execvpe(file, argv, environ);
}
EXPORT int execle(const char* path, const char* arg0, ...) {
  va_list ap;
  char* const* envp = nullptr;
  COLLECT_ARGS(arg0, ap, argv, envp = va_arg(ap, char* const*));
  return execve(path, argv, envp);
}
