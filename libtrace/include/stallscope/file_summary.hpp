// What `stallscope info` reports: per trace file its process, tracks, event
// counts by kind, time span, drops and completeness; per process its ring
// segments; per run the totals and the disk used against the disk budget.
//
//   auto run = stallscope::reader::summarize_run({"run/a.sst", "run/b.sst"});
//   stallscope::reader::print_run_summary(std::cout, run);
//   return run.files_error > 0 ? 1 : 0;
//
// Streams every event once; memory grows with tracks, not events.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/format.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::reader {

inline constexpr size_t kKindSlots = static_cast<size_t>(format::Kind::kMaxKnown) + 1;

struct TrackSummary {
  uint32_t track_id = 0;
  bool in_table = false;  // false: events on a track the track table never declared
  format::TrackType type = format::TrackType::kThread;
  uint32_t tid = 0;
  uint32_t device = 0;
  std::string name;  // thread name ("" when unnamed)
  uint64_t events = 0;
  uint64_t gap_dropped = 0;  // sum of this track's gap records
};

struct FileSummary {
  std::string path;
  Status status = Status::kError;
  std::string error;                  // "" unless status is kError
  std::vector<std::string> warnings;  // each names the file
  bool header_valid = false;          // false: nothing below the status is known
  uint32_t pid = 0;
  uint32_t parent_pid = 0;
  uint32_t segment = 0;
  bool ring_segment = false;
  uint64_t ring_discarded = 0;  // header: events in deleted earlier segments
  std::string host;             // "" when not recorded
  int64_t rank = -1;            // -1 when not recorded
  uint16_t version_major = 0, version_minor = 0;
  uint64_t file_bytes = 0;
  uint64_t lost_bytes = 0;         // cut files: bytes after the last complete chunk
  uint64_t disk_budget_bytes = 0;  // per process, from metadata config.max_mb (0 = none)

  uint64_t events = 0;
  std::array<uint64_t, kKindSlots> events_by_kind{};  // index = format::Kind value
  int64_t first_ns = 0, last_ns = 0;                  // monotonic span (valid when events > 0)
  int64_t first_real_ns = 0;                          // CLOCK_REALTIME of first_ns

  uint64_t gap_dropped = 0;  // buffer drops announced by gap records
  bool has_end = false;
  uint64_t end_dropped_buffer = 0;  // End chunk: sum of TrackTotals::dropped_buffer
  uint64_t end_dropped_disk = 0;    // End chunk: max(EndSummary::disk_dropped, sum of tracks)
  uint64_t end_written = 0;         // End chunk: sum of TrackTotals::written
  SkipCounts skipped;
  std::vector<TrackSummary> tracks;  // table order, then undeclared tracks

  // Buffer drops of this file: the End totals when present, else the gaps.
  uint64_t buffer_dropped() const noexcept {
    return end_dropped_buffer > gap_dropped ? end_dropped_buffer : gap_dropped;
  }
};

// One traced process: its files (ring segments in segment order).
struct ProcessSummary {
  std::string host;
  uint32_t pid = 0;
  int64_t rank = -1;
  std::vector<size_t> files;    // indices into RunSummary::files
  uint64_t ring_discarded = 0;  // the largest of its segments' counts
  uint64_t disk_bytes = 0;
  uint64_t disk_budget_bytes = 0;  // 0 = none recorded
};

struct RunSummary {
  std::vector<FileSummary> files;
  std::vector<ProcessSummary> processes;  // by host, pid
  size_t files_complete = 0, files_cut = 0, files_error = 0;
  uint64_t events = 0;
  uint64_t buffer_dropped = 0;
  uint64_t disk_dropped = 0;
  uint64_t ring_discarded = 0;
  uint64_t disk_bytes = 0;         // sum of file sizes
  uint64_t disk_budget_bytes = 0;  // sum over processes that recorded one
  size_t processes_without_budget = 0;
};

// Streams `r` (from wherever it stands) and summarizes it. Never throws for bad input.
STALLSCOPE_API FileSummary summarize_file(TraceReader& r);
// Opens and summarizes one file.
STALLSCOPE_API FileSummary summarize_file(const std::string& path);
// Called before each file is read: (index from 0, count, path).
using FileProgress = std::function<void(size_t, size_t, const std::string&)>;

// Summarizes each file and groups them by process (host, pid).
STALLSCOPE_API RunSummary summarize_run(const std::vector<std::string>& paths,
                                        const FileProgress& progress = {});

// Human-readable report, as `stallscope info` prints it.
STALLSCOPE_API void print_file_summary(std::ostream& out, const FileSummary& f);
STALLSCOPE_API void print_run_summary(std::ostream& out, const RunSummary& run);

// "1.5 KiB", "3.2 GiB".
STALLSCOPE_API std::string format_bytes(uint64_t bytes);

// `text` made safe to print on a terminal: control characters other than
// newline and tab, DEL, C1 controls and bytes that are not UTF-8 become
// "\xNN"; with `keep_sgr`, colour sequences (ESC [ digits ; m) pass, so
// stallscope's own colours survive. Every text output of names from traces
// goes through it.
STALLSCOPE_API std::string terminal_safe(std::string_view text, bool keep_sgr = false);

}  // namespace stallscope::reader
