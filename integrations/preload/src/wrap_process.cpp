// fork, posix_spawn and exec. A fork child gets its own trace file (the
// recorder's fork handler) and starts recording at once so that its CPU use
// is sampled. Exec and spawn pass the child the environment the follow
// policy asks for; exec completes this process's file first. In a vfork
// child (pid differs from the recorded one) the exec wrappers only call
// through: nothing may be allocated or written there.
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "env_policy.hpp"
#include "real.hpp"
#include "shim.hpp"
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

// The recorder's file is completed before the image is replaced. The new
// image records under the same pid, so the recorder gives it the next free
// name (<base>.<N>.sst); this image's file is never moved or touched again.
void before_exec() {
  pl::Guard guard;  // the recorder's own calls are not traced
  stallscope_shutdown();
}

template <typename Exec>
int exec_with(const char* path, char* const* envp, Exec call) {
  if (pl::in_foreign_process()) return call(envp);  // a vfork child: call through
  char** env = pl::child_env(envp, pl::follow_child(path));
  before_exec();
  const int r = call(env);
  const int saved = errno;
  pl::free_child_env(env, envp);
  errno = saved;
  return r;
}

template <typename Spawn>
int spawn_with(const char* path, char* const* envp, Spawn call) {
  if (pl::in_foreign_process()) return call(envp);
  char** env = pl::child_env(envp, pl::follow_child(path));
  const int r = call(env);
  pl::free_child_env(env, envp);
  return r;
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

#define EXPORT STALLSCOPE_SHIM_EXPORT

EXPORT pid_t fork() {
  const pid_t pid = real_fork.get()();
  if (pid == 0) pl::shim_after_fork_child();
  return pid;
}

EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                       const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return spawn_with(path, envp, [&](char* const* env) {
    return real_posix_spawn.get()(pid, path, fa, attr, argv, env);
  });
}
EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                        const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return spawn_with(file, envp, [&](char* const* env) {
    return real_posix_spawnp.get()(pid, file, fa, attr, argv, env);
  });
}

EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return exec_with(path, envp, [&](char* const* env) {
    return real_execve.get()(path, argv, env);
  });
}
EXPORT int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }
EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_with(file, envp, [&](char* const* env) {
    return real_execvpe.get()(file, argv, env);
  });
}
EXPORT int execvp(const char* file, char* const argv[]) { return execvpe(file, argv, environ); }
EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  const char* name = argv[0];  // argv is never null (glibc declares it nonnull)
  return exec_with(name, envp, [&](char* const* env) {
    return real_fexecve.get()(fd, argv, env);
  });
}
EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                    int flags) {
  return exec_with(path, envp, [&](char* const* env) {
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
