// Condition variables and semaphores, for relays (relays.hpp). Each wrapper
// calls the real function with its own arguments and returns its result
// and errno untouched. The waits are cancellation points: nothing here is
// noexcept or holds state across the call, so a cancelled wait unwinds
// through the wrapper as through libc.
//
// glibc exports pthread_cond_* twice: GLIBC_2.2.5 (the old condition
// variable, which dlsym(RTLD_NEXT) may return) and GLIBC_2.3.2 (what
// programs link against): the latter is asked for by version.
#include <pthread.h>
#include <semaphore.h>

#include <cerrno>

#include "real.hpp"
#include "relays.hpp"
#include "shim.hpp"

namespace pl = stallscope::preload;
using pl::SyncKind;

namespace {

#if defined(__x86_64__)
#define COND_VERSION "GLIBC_2.3.2"
#else
#define COND_VERSION nullptr  // one version only: the default
#endif

STALLSCOPE_REAL_VERSION(pthread_cond_wait, COND_VERSION, nullptr);
STALLSCOPE_REAL_VERSION(pthread_cond_timedwait, COND_VERSION, nullptr);
STALLSCOPE_REAL_VERSION(pthread_cond_signal, COND_VERSION, nullptr);
STALLSCOPE_REAL_VERSION(pthread_cond_broadcast, COND_VERSION, nullptr);
STALLSCOPE_REAL_VERSION(pthread_cond_init, COND_VERSION, nullptr);
STALLSCOPE_REAL_VERSION(pthread_cond_destroy, COND_VERSION, nullptr);
STALLSCOPE_REAL(pthread_cond_clockwait, nullptr);
STALLSCOPE_REAL(sem_wait, nullptr);
STALLSCOPE_REAL(sem_timedwait, nullptr);
STALLSCOPE_REAL(sem_clockwait, nullptr);
STALLSCOPE_REAL(sem_trywait, nullptr);
STALLSCOPE_REAL(sem_post, nullptr);
STALLSCOPE_REAL(sem_init, nullptr);
STALLSCOPE_REAL(sem_destroy, nullptr);

// A condition-variable wait: 0 when woken (ETIMEDOUT and errors record nothing).
template <typename Fn>
int cond_waited(pthread_cond_t* c, Fn call) {
  const pl::SyncWait w = pl::relay_wait_begin(c, SyncKind::kCond);
  const int r = call();
  if (r == 0) pl::relay_wait_end(w);
  return r;
}

// A semaphore wait: 0 when it got the semaphore; errno as the call left it.
template <typename Fn>
int sem_waited(sem_t* s, Fn call) {
  const pl::SyncWait w = pl::relay_wait_begin(s, SyncKind::kSem);
  const int r = call();
  if (r == 0) pl::relay_wait_end(w);
  return r;
}

}  // namespace

#define EXPORT STALLSCOPE_SHIM_EXPORT

EXPORT int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  auto fn = real_pthread_cond_wait.get();
  if (fn == nullptr) return EINVAL;
  return cond_waited(c, [&] { return fn(c, m); });
}
EXPORT int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const timespec* at) {
  auto fn = real_pthread_cond_timedwait.get();
  if (fn == nullptr) return EINVAL;
  return cond_waited(c, [&] { return fn(c, m, at); });
}
EXPORT int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clock,
                                  const timespec* at) {
  auto fn = real_pthread_cond_clockwait.get();
  if (fn == nullptr) return EINVAL;
  return cond_waited(c, [&] { return fn(c, m, clock, at); });
}
EXPORT int pthread_cond_signal(pthread_cond_t* c) noexcept {
  auto fn = real_pthread_cond_signal.get();
  if (fn == nullptr) return EINVAL;
  pl::relay_signal(c);
  return fn(c);
}
EXPORT int pthread_cond_broadcast(pthread_cond_t* c) noexcept {
  auto fn = real_pthread_cond_broadcast.get();
  if (fn == nullptr) return EINVAL;
  pl::relay_signal(c);
  return fn(c);
}
EXPORT int pthread_cond_init(pthread_cond_t* c, const pthread_condattr_t* a) noexcept {
  auto fn = real_pthread_cond_init.get();
  if (fn == nullptr) return EINVAL;
  pl::relay_forget(c);
  return fn(c, a);
}
EXPORT int pthread_cond_destroy(pthread_cond_t* c) noexcept {
  auto fn = real_pthread_cond_destroy.get();
  if (fn == nullptr) return EINVAL;
  pl::relay_forget(c);
  return fn(c);
}

EXPORT int sem_wait(sem_t* s) {
  auto fn = real_sem_wait.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  return sem_waited(s, [&] { return fn(s); });
}
EXPORT int sem_timedwait(sem_t* s, const timespec* at) {
  auto fn = real_sem_timedwait.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  return sem_waited(s, [&] { return fn(s, at); });
}
EXPORT int sem_clockwait(sem_t* s, clockid_t clock, const timespec* at) {
  auto fn = real_sem_clockwait.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  return sem_waited(s, [&] { return fn(s, clock, at); });
}
EXPORT int sem_trywait(sem_t* s) noexcept {
  auto fn = real_sem_trywait.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  pl::relay_try(s);
  return fn(s);
}
EXPORT int sem_post(sem_t* s) noexcept {
  auto fn = real_sem_post.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  pl::relay_signal(s);
  return fn(s);
}
EXPORT int sem_init(sem_t* s, int pshared, unsigned value) noexcept {
  auto fn = real_sem_init.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  pl::relay_forget(s);
  return fn(s, pshared, value);
}
EXPORT int sem_destroy(sem_t* s) noexcept {
  auto fn = real_sem_destroy.get();
  if (fn == nullptr) return errno = ENOSYS, -1;
  pl::relay_forget(s);
  return fn(s);
}
