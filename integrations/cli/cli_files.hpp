// Files the CLI reads and writes, made safe against what a shared or hostile
// directory may hold (RELIABILITY.md cases 27 and 28):
//
// - inputs are opened without blocking (a FIFO, a socket or a device named
//   as input is refused with a message, never waited on);
// - outputs never follow a symlink, never replace a non-regular file and
//   never leave a half-written file where the user had a good one.
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace stallscope::cli {

// Who named an output, which decides what an existing non-regular file
// there means.
enum class OutputOwner {
  kUser,       // a flag's value: a FIFO, tty, device, /dev/stdout or /dev/fd/N is
               // written in place (`--html /dev/stdout`, a process substitution)
  kStallscope  // a file stallscope keeps (RUN/report.txt, RUN/control): anything
               // but a regular file there is refused, never opened
};

// Writes `dest` with what `fill` puts into the stream. "-" is standard
// output. A regular destination (or none yet) is written to an unpredictable
// temporary in its directory (created O_EXCL, so never through a planted
// symlink) and renamed over it: the old file stays whole until the new one
// is complete, and a symlink at `dest` is replaced, not followed. Returns ""
// on success, else a message naming the file and the error.
std::string write_output(const std::string& dest, OutputOwner owner,
                         const std::function<void(std::ostream&)>& fill);

// Reads a whole regular file of at most `max_bytes` into *out. Opens it
// without blocking; a non-regular file, a larger one or a failed read gives
// a message naming the file ("" on success).
std::string read_input_file(const std::string& path, std::string* out, size_t max_bytes);

// "" when `path` can be read as a regular file, else why not (stat follows
// symlinks: a link to a regular file is fine).
std::string not_a_regular_file(const std::string& path);

// Says on stderr, one line each, which entries of the directories among
// `paths` look like inputs (*.sst, *.json, *.json.gz) but are skipped
// because they are not regular files: "stallscope CMD: RUN/x.sst: not a
// regular file (FIFO); skipped". Only stat()s them: never blocks. Returns
// how many it named.
size_t note_skipped_inputs(const std::string& cmd, const std::vector<std::string>& paths);

}  // namespace stallscope::cli
