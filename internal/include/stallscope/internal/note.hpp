// Notes on stderr: the one helper the loader, the CUDA library and the
// preload shim write their messages through (the recorder keeps its own
// once-at-start list, filtered by the same STALLSCOPE_QUIET).
//
//   internal::note("stallscope loader: ", "io_uring unavailable (%s)", why);
//
// One line, "<prefix><text>\n", in one write(2) (lines of several threads
// do not interleave), unless STALLSCOPE_QUIET is on (config::quiet()).
// Allocation-free; a line past 1 KiB is cut.
#pragma once

#include <cstdarg>

namespace stallscope::internal {

void note(const char* prefix, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));
void vnote(const char* prefix, const char* fmt, va_list ap) noexcept
    __attribute__((format(printf, 2, 0)));
// `text` as it is, no formatting (safe for any text).
void note_text(const char* prefix, const char* text) noexcept;

}  // namespace stallscope::internal
