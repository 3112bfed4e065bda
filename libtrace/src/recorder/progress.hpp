// Step progress of a traced process, published for `stallscope run`
// (STALLSCOPE_PROGRESS=on). The flusher scans the records it has just
// written — never the hot path — counting steps (step markers, and ranges
// whose name matches the default step pattern, matched once per name) and
// capture windows, and rewrites RUN/progress/<file base> when they change:
//
//   pid=4242 steps=17 capture=on windows_closed=0 ended=0 step_ms=812.4 wait_ms=401.0
//   kernel_ms=0.0 copy_ms=0.0 comm_ms=0.0
//
// (one line). The *_ms fields sum the durations of the records on disk:
// steps, the trainer's data waits, device kernels, copies and collectives —
// for the live line's "largest so far", not an attribution (kernels of
// several streams overlap, copies may hide under kernels).
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
  std::string path;                                  // RUN/progress/<base> (for messages)
  std::string base;                                  // <base>, in RUN/progress
  uint64_t steps = 0;                                // steps begun, in records already on disk
  uint64_t windows_closed = 0;                       // window-end records on disk
  bool capture = false;                              // last capture record on disk
  // Durations summed (ns) over the records on disk, and the open begin of
  // each (track, kind) whose end is still to come.
  double step_ns = 0, wait_ns = 0, kernel_ns = 0, copy_ns = 0, comm_ns = 0;
  std::unordered_map<uint64_t, uint64_t> open_begin;
  double ns_per_tick = 0;                            // 0: not known yet
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
