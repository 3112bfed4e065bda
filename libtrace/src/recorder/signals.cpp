// SIGTERM, SIGINT, SIGHUP (a dropped ssh session) and SIGQUIT complete the
// file before the default action ends the process (RELIABILITY.md 3, 35). The handler only asks the flusher thread to
// flush and waits a bounded time — nothing async-signal-unsafe runs in it —
// then chains to the program's own disposition.
//
// Under the preload shim the handler must also be invisible: a program
// (Python above all) reads the disposition at start-up and behaves
// differently when it is not SIG_DFL — Python then installs no
// KeyboardInterrupt handler, and its forkserver fails restoring "None". So
// the shim routes the program's sigaction/signal here: the program's
// disposition is kept aside and read back as set, while the recorder's
// handler stays installed and chains to it. SIG_IGN is really installed
// (an ignored signal stays ignored across exec), and the recorder's handler
// comes back when the program installs a handler or SIG_DFL again.
#include <signal.h>

#include <atomic>
#include <cerrno>

#include "recorder/recorder.hpp"
#include "stallscope/internal/shim_abi.hpp"

// libc's own entry point: the shim interposes `sigaction` and `signal`, and
// the recorder's calls must not come back to it. Sanitizer builds have no
// such wrappers and must go through the sanitizer's interceptor.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STALLSCOPE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STALLSCOPE_SANITIZED 1
#endif
#endif
#ifdef STALLSCOPE_SANITIZED
static int libc_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return sigaction(sig, act, old);
}
#else
extern "C" int __sigaction(int sig, const struct sigaction* act, struct sigaction* old);
static int libc_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return __sigaction(sig, act, old);
}
#endif

namespace stallscope::detail {
namespace {

constexpr int kSignalFlushMs = 1000;
constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

// The program's disposition per signal, under a sequence lock: written by
// program_sigaction (any thread), read by the handler.
struct Slot {
  std::atomic<uint32_t> seq{0};
  struct sigaction prev {};
};
Slot g_slots[NSIG];
std::atomic<bool> g_installed{false};
std::atomic_flag g_write_lock = ATOMIC_FLAG_INIT;

bool handled(int sig) {
  for (int s : kSignals)
    if (s == sig) return g_installed.load(std::memory_order_acquire);
  return false;
}

bool is_default(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}
bool is_ignored(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN;
}

struct sigaction read_prev(int sig) {
  Slot& s = g_slots[sig];
  struct sigaction out {};
  for (int tries = 0; tries < 1000; ++tries) {
    const uint32_t a = s.seq.load(std::memory_order_acquire);
    if (a & 1) continue;
    out = s.prev;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) == a) break;
  }
  return out;
}

// Writers hold g_write_lock with every signal blocked, so a handler on the
// same thread never meets a half-written slot it would wait for.
void write_prev(int sig, const struct sigaction& prev) {
  Slot& s = g_slots[sig];
  s.seq.fetch_add(1, std::memory_order_acq_rel);
  s.prev = prev;
  s.seq.fetch_add(1, std::memory_order_release);
}

void on_signal(int sig, siginfo_t* info, void* uctx);

// Installs the recorder's handler in front of `prev` (the program's
// disposition): with the program's mask and its SA_RESTART/SA_ONSTACK/
// SA_NODEFER, so interrupted calls behave as the program asked.
int install_ours(int sig, const struct sigaction& prev) {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  const int keep = SA_RESTART | SA_ONSTACK | SA_NODEFER;
  sa.sa_flags = SA_SIGINFO | (is_default(prev) ? SA_RESTART | (prev.sa_flags & SA_ONSTACK)
                                               : prev.sa_flags & keep);
  sa.sa_mask = prev.sa_mask;
  return libc_sigaction(sig, &sa, nullptr);
}

void set_default_and_raise(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  libc_sigaction(sig, &dfl, nullptr);
  raise(sig);  // delivered when this handler returns
}

void on_signal(int sig, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  struct sigaction prev = read_prev(sig);
  // The default action ends the process: complete the file first.
  request_flush_and_wait(is_default(prev), kSignalFlushMs);
  if (is_default(prev)) {
    set_default_and_raise(sig);
  } else if (!is_ignored(prev)) {
    if (prev.sa_flags & SA_RESETHAND) {  // one delivery, then the default
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      write_prev(sig, dfl);
    }
    if (prev.sa_flags & SA_SIGINFO)
      prev.sa_sigaction(sig, info, uctx);
    else
      prev.sa_handler(sig);
  }
  errno = saved_errno;
}

class WriteLock {
 public:
  WriteLock() noexcept {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
    while (g_write_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~WriteLock() {
    g_write_lock.clear(std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;

 private:
  sigset_t old_;
};

}  // namespace

void install_signal_handlers() {
  {
    WriteLock lock;
    for (int sig : kSignals) {
      struct sigaction prev {};
      if (libc_sigaction(sig, nullptr, &prev) != 0) continue;
      write_prev(sig, prev);
      if (!is_ignored(prev)) install_ours(sig, prev);  // an ignored signal stays ignored
    }
  }
  g_installed.store(true, std::memory_order_release);
}

int program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (sig <= 0 || sig >= NSIG || !handled(sig)) return 1;
  struct sigaction wanted {};
  if (act != nullptr) wanted = *act;  // act and old may be one struct
  WriteLock lock;
  if (old != nullptr) *old = read_prev(sig);
  if (act == nullptr) return 0;
  const int rc = is_ignored(wanted) ? libc_sigaction(sig, &wanted, nullptr) : install_ours(sig, wanted);
  if (rc != 0) return -1;  // errno from libc
  write_prev(sig, wanted);
  return 0;
}

}  // namespace stallscope::detail

extern "C" int stallscope_internal_v1_program_sigaction(int sig, const struct sigaction* act,
                                                       struct sigaction* old) noexcept {
  return stallscope::detail::program_sigaction(sig, act, old);
}
