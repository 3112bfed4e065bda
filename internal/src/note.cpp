#include "stallscope/internal/note.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "stallscope/internal/config.hpp"

namespace stallscope::internal {

namespace {

constexpr size_t kLine = 1024;

// Descriptor 2 as this image of the process started with it (RELIABILITY.md
// 41): a program that closes 0-2 and opens its own file there later must
// never find our notes in it, so a note goes out only while descriptor 2
// still names the same file — none at all when it was closed at start.
struct StderrIdentity {
  bool known = false;
  bool open = false;
  dev_t dev = 0;
  ino_t ino = 0;
};
StderrIdentity g_stderr_at_start;

StderrIdentity stderr_now() noexcept {
  StderrIdentity id;
  id.known = true;
  struct stat st {};
  // The raw call: the preload shim may interpose the fstat family.
  if (::syscall(SYS_fstat, 2, &st) != 0) return id;
  id.open = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  return id;
}

// Early: before the shim's and the recorder's own start-up notes.
__attribute__((constructor(101))) void remember_stderr() noexcept {
  if (!g_stderr_at_start.known) g_stderr_at_start = stderr_now();
}

bool stderr_unchanged() noexcept {
  if (!g_stderr_at_start.known) remember_stderr();  // a note before the constructor ran
  const StderrIdentity now = stderr_now();
  return g_stderr_at_start.open && now.open && now.dev == g_stderr_at_start.dev &&
         now.ino == g_stderr_at_start.ino;
}

// One write(2) with SIGPIPE blocked: a stderr pipe whose reader is gone
// (a log collector that died) gives EPIPE and the note is dropped, instead
// of the signal ending the program. The SIGPIPE that write raised is taken
// back, unless one was already pending before it (that one is the
// program's). The raw system call: the preload shim interposes write().
void write_line(char* line, size_t n) noexcept {
  const int saved_errno = errno;
  if (!stderr_unchanged()) {
    errno = saved_errno;
    return;
  }
  line[n] = '\n';
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigemptyset(&pending);
  const bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  long w;
  do {
    w = ::syscall(SYS_write, 2, line, n + 1);
  } while (w < 0 && errno == EINTR);
  if (w < 0 && errno == EPIPE && !was_pending) {
    const timespec zero{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
}

size_t put_prefix(char* line, const char* prefix) noexcept {
  const size_t p = std::strlen(prefix);
  const size_t k = p < kLine / 4 ? p : kLine / 4;
  std::memcpy(line, prefix, k);
  return k;
}

}  // namespace

void vnote(const char* prefix, const char* fmt, va_list ap) noexcept {
  if (config::quiet()) return;
  char line[kLine + 1];
  const size_t k = put_prefix(line, prefix);
  const int n = std::vsnprintf(line + k, kLine - k, fmt, ap);
  if (n < 0) return;
  const size_t len =
      k + (static_cast<size_t>(n) < kLine - k ? static_cast<size_t>(n) : kLine - k - 1);
  write_line(line, len);
}

void note(const char* prefix, const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  vnote(prefix, fmt, ap);
  va_end(ap);
}

void note_text(const char* prefix, const char* text) noexcept {
  if (config::quiet()) return;
  char line[kLine + 1];
  const size_t k = put_prefix(line, prefix);
  const size_t t = std::strlen(text);
  const size_t m = t < kLine - k ? t : kLine - k;
  std::memcpy(line + k, text, m);
  write_line(line, k + m);
}

}  // namespace stallscope::internal
