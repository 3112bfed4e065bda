// Writes one note through stallscope's note helper (internal/note.hpp), for
// test_repro_notes: run with descriptor 2 a pipe whose reader is gone.
//   note_writer plain     SIGPIPE at its default action; prints "ALIVE"
//   note_writer blocked   SIGPIPE blocked by the program; prints "PENDING 0|1"
//                         (is a SIGPIPE left pending after the note?)
//   note_writer pending   as blocked, with a SIGPIPE of the program's own
//                         raised before the note (it must stay pending)
#include <signal.h>

#include <cstdio>
#include <cstring>

#include "stallscope/internal/note.hpp"

namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "plain";
  if (std::strcmp(mode, "plain") != 0) {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    if (std::strcmp(mode, "pending") == 0) raise(SIGPIPE);
  }
  stallscope::internal::note_text("stallscope: ", "a note nobody reads");
  if (std::strcmp(mode, "plain") == 0) {
    std::printf("ALIVE\n");
  } else {
    std::printf("PENDING %d\n", sigpipe_pending() ? 1 : 0);
  }
  return std::fflush(stdout) == 0 ? 0 : 2;
}
