// Notes on stderr: the one helper every stallscope message written inside a
// traced program goes through (the recorder's warn(), the loader, the CUDA
// library, the preload shim).
//
//   internal::note("stallscope loader: ", "io_uring unavailable (%s)", why);
//
// One line, "<prefix><text>\n", in one write(2) (lines of several threads
// do not interleave), unless STALLSCOPE_QUIET is on (config::quiet()).
// Allocation-free; a line past 1 KiB is cut. Never raises SIGPIPE: written
// with it blocked, dropped on EPIPE (a stderr pipe nobody reads). Dropped
// too once descriptor 2 no longer names the file it named when the library
// holding this copy was loaded — for the shim and the recorder, the start
// of the program's image (closed then, or since closed and reused by the
// program for a file of its own): RELIABILITY.md 41. errno is kept.
#pragma once

#include <cstdarg>

namespace stallscope::internal {

void note(const char* prefix, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
void vnote(const char* prefix, const char* fmt, va_list ap) noexcept
    __attribute__((format(printf, 2, 0)));
// `text` as it is, no formatting (safe for any text).
void note_text(const char* prefix, const char* text) noexcept;

}  // namespace stallscope::internal
