// Step progress of a traced process, published for `stallscope run`
// (STALLSCOPE_PROGRESS=on). The flusher scans the records it has just
// written — never the hot path — counting steps (step markers, and ranges
// whose name matches the default step pattern, matched once per name) and
// capture windows, and rewrites RUN/progress/<file base> when they change:
//
//   pid=4242 steps=17 capture=on windows_closed=0 ended=0
//
// `stallscope run` reads these small files to close the capture window after
// step M+N, and to know that every rank's window-end record is on disk.
// A forked worker's recorder scans too, with progress off, while its
// flusher takes the samples (Recorder::sample_in_flusher): at its first step
// the sampler gets its own thread at the full period.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace stallscope::detail {

struct Recorder;

struct ProgressState {
  bool on = false;                                   // STALLSCOPE_PROGRESS=on
  std::string path;                                  // RUN/progress/<base>
  std::string tmp_template;                          // RUN/progress/.<base>.XXXXXX
  uint64_t steps = 0;                                // steps begun, in records already on disk
  uint64_t windows_closed = 0;                       // window-end records on disk
  bool capture = false;                              // last capture record on disk
  std::unordered_map<uint32_t, bool> range_is_step;  // by name id
  std::string last_written;
};

// True for names the analyzer's default step pattern matches:
// ProfilerStep#N, step, train_step, iteration, optionally followed by
// separators and a number; case-insensitive.
bool is_step_range_name(std::string_view name) noexcept;

// Sets up the progress file next to the trace (RUN/progress/<base>).
void progress_open(Recorder& r, const std::string& base);
// Counts steps and capture records in an events payload that reached the
// file (track blocks, as written by the flusher).
void progress_scan(Recorder& r, const uint8_t* payload, size_t bytes);
// Rewrites the progress file when its text changed (temp file + rename).
void progress_publish(Recorder& r, bool ended);

}  // namespace stallscope::detail
