// Chrome trace-event JSON export (`stallscope export --chrome`), for
// ui.perfetto.dev or chrome://tracing.
//
// One process per traced process (named from its host, rank and pid), one
// thread per recorded track. Spans become complete events ("X", the kind as
// category, attributes in args); spans that overlap others on their track
// without nesting (reads in flight, kAsync records) become async "b"/"e"
// pairs so they still display; counters become "C", instants "i".
// Begin/End records are paired (per-track stack; kAsync ones by kind and
// correlation id); a Begin without End is closed at its track's last
// timestamp, with a warning. JSON is written while decoding: memory does not
// grow with the trace.
//
//   stallscope::reader::ChromeExportOptions opt;
//   opt.steps = {{10, 12}};  // only steps 10..12
//   std::ofstream out("trace.json");
//   auto res = stallscope::reader::export_chrome({"run/a.sst"}, out, opt);
//   for (auto& w : res.warnings) std::cerr << w << "\n";
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stallscope/reader.hpp"

namespace stallscope::reader {

// A time given on the command line: ns relative to the trace start (the
// earliest recorder start of the exported files), or absolute monotonic ns.
struct TimeBound {
  int64_t ns = 0;
  bool absolute = false;
};

namespace detail {
class ChromeWriter;
}

// Lets a caller add its own tracks to an export (ChromeExportOptions::
// extra_events): processes, named threads and complete slices, written as
// well-formed trace events in the same time base and window. Valid only
// during the callback; not thread-safe.
class STALLSCOPE_API ChromeEventSink {
 public:
  using Arg = std::pair<std::string_view, double>;  // "args" entry: key (no escaping needed), number

  // A new process (a pid no traced process uses), named `name`, shown in
  // rank order by `sort_index`. Returns its pid for thread() and slice().
  uint32_t add_process(std::string_view name, int64_t sort_index);
  void thread(uint32_t pid, uint32_t tid, std::string_view name);
  // An "X" event from start_ns for dur_ns (absolute monotonic ns). False,
  // writing nothing, when it lies outside the export window.
  bool slice(uint32_t pid, uint32_t tid, std::string_view cat, std::string_view name,
             int64_t start_ns, int64_t dur_ns, std::span<const Arg> args = {});
  int64_t base_mono_ns() const noexcept;  // JSON ts 0

  ChromeEventSink(detail::ChromeWriter& w, std::vector<uint32_t>& used_pids) noexcept
      : w_(w), used_pids_(used_pids) {}

 private:
  detail::ChromeWriter& w_;
  std::vector<uint32_t>& used_pids_;
};

struct ChromeExportOptions {
  std::optional<TimeBound> from;  // keep events that end at or after this
  std::optional<TimeBound> to;    // keep events that start at or before this
  // Inclusive step index range: the window from the first of these steps'
  // starts to the last of their ends (step records: StepExt index, else corr).
  std::optional<std::pair<uint64_t, uint64_t>> steps;
  uint64_t size_warning_bytes = uint64_t{1} << 30;  // what a browser can open
  // Called before each file is streamed: (index from 0, count, path).
  std::function<void(size_t, size_t, const std::string&)> progress;
  // Called once after every file is exported, before traceEvents closes, to
  // add tracks (e.g. the analyzer's attribution); empty = none.
  std::function<void(ChromeEventSink&)> extra_events;
};

struct ChromeExportResult {
  uint64_t events = 0;       // trace events written (metadata events included)
  uint64_t bytes = 0;        // JSON bytes written
  int64_t base_mono_ns = 0;  // trace start: JSON ts 0
  int64_t from_ns = 0;       // resolved window, absolute monotonic ns
  int64_t to_ns = 0;
  std::vector<std::string> warnings;
  std::vector<std::string> errors;  // unreadable files or parts, an empty step window
  bool ok() const noexcept { return errors.empty(); }
};

// Parses "1500000" (ns), "250us", "1.5ms", "2s"; a leading '@' makes it
// absolute monotonic. False with `*error` set on bad text or overflow.
STALLSCOPE_API bool parse_time_bound(std::string_view text, TimeBound& out, std::string* error);
// Parses "A:B" (inclusive, A <= B) or "A" (one step).
STALLSCOPE_API bool parse_step_range(std::string_view text, std::pair<uint64_t, uint64_t>& out,
                                     std::string* error);

// Writes the JSON of `readers` to `out`. Readers are streamed from where they
// stand (rewound first when a step window is computed). Never throws for bad
// input; errors and warnings are returned, each naming its file.
STALLSCOPE_API ChromeExportResult export_chrome(std::vector<TraceReader>& readers,
                                                std::ostream& out, const ChromeExportOptions& opt);
// Opens `paths` and exports them.
STALLSCOPE_API ChromeExportResult export_chrome(const std::vector<std::string>& paths,
                                                std::ostream& out, const ChromeExportOptions& opt);

}  // namespace stallscope::reader
