// Text rendering of file and run summaries (`stallscope info`).
#include <cstdio>
#include <ctime>
#include <ostream>
#include <sstream>

#include "stallscope/file_summary.hpp"

namespace stallscope::reader {

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

namespace {

std::string format_seconds(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

std::string format_utc(int64_t real_ns) {
  const time_t secs = static_cast<time_t>(real_ns / 1000000000);
  std::tm tm{};
  if (real_ns <= 0 || gmtime_r(&secs, &tm) == nullptr) return "unknown time";
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char out[96];
  std::snprintf(out, sizeof out, "%s.%03d UTC", buf, static_cast<int>(real_ns / 1000000 % 1000));
  return out;
}

std::string track_type_name(format::TrackType t) {
  switch (t) {
    case format::TrackType::kThread:
      return "thread";
    case format::TrackType::kGpuStream:
      return "gpu stream";
    case format::TrackType::kProcess:
      return "process";
    case format::TrackType::kEmulated:
      return "emulated device";
  }
  return "track type " + std::to_string(static_cast<int>(t));
}

std::string identity_line(const FileSummary& f) {
  std::ostringstream s;
  s << "pid " << f.pid << " (parent " << f.parent_pid << ")";
  s << " on " << (f.host.empty() ? "unknown host" : f.host);
  if (f.rank >= 0) s << ", rank " << f.rank;
  s << ", format " << f.version_major << "." << f.version_minor;
  if (f.ring_segment) s << ", ring segment " << f.segment;
  return s.str();
}

std::string status_line(const FileSummary& f) {
  switch (f.status) {
    case Status::kComplete:
      return "complete";
    case Status::kTruncated:
      return f.lost_bytes > 0 ? "cut (no End chunk; " + format_bytes(f.lost_bytes) +
                                    " after the last complete chunk lost)"
                              : "cut (no End chunk; every written chunk is intact)";
    case Status::kError:
      return "error: " + f.error;
  }
  return "?";
}

void print_events(std::ostream& out, const FileSummary& f) {
  out << "  events    " << f.events;
  const char* sep = ": ";
  for (size_t k = 1; k < f.events_by_kind.size(); ++k) {
    if (f.events_by_kind[k] == 0) continue;
    out << sep << kind_name(static_cast<uint8_t>(k)) << " " << f.events_by_kind[k];
    sep = ", ";
  }
  out << "\n";
  if (f.events > 0)
    out << "  span      " << format_seconds(f.last_ns - f.first_ns) << " from "
        << format_utc(f.first_real_ns) << " (monotonic " << f.first_ns << " .. " << f.last_ns
        << " ns)\n";
}

void print_tracks(std::ostream& out, const FileSummary& f) {
  out << "  tracks    " << f.tracks.size() << "\n";
  for (const auto& t : f.tracks) {
    out << "    track " << t.track_id << ": ";
    if (!t.in_table) {
      out << "(not in the track table)";
    } else {
      out << track_type_name(t.type) << " " << t.tid;
      if (t.type == format::TrackType::kGpuStream || t.type == format::TrackType::kEmulated)
        out << " (device " << t.device << ")";
      if (!t.name.empty()) out << " \"" << t.name << "\"";
    }
    out << ", " << t.events << " events";
    if (t.gap_dropped > 0) out << ", " << t.gap_dropped << " dropped";
    out << "\n";
  }
}

void print_drops(std::ostream& out, const FileSummary& f) {
  out << "  drops     buffer " << f.buffer_dropped() << " (gap records " << f.gap_dropped;
  if (f.has_end) {
    out << ", End totals " << f.end_dropped_buffer << ")";
    out << "; disk budget " << f.end_dropped_disk;
  } else {
    out << ", no End totals)";
    out << "; disk budget unknown (no End chunk)";
  }
  out << "; ring discarded " << f.ring_discarded << "\n";
  const SkipCounts& s = f.skipped;
  if (s.unknown_kinds + s.unknown_exts + s.unknown_chunks > 0)
    out << "  skipped   " << s.unknown_kinds << " records of unknown kinds, " << s.unknown_exts
        << " unknown extensions, " << s.unknown_chunks << " unknown chunks\n";
}

void print_process(std::ostream& out, const RunSummary& run, const ProcessSummary& p) {
  out << "  " << (p.host.empty() ? "unknown host" : p.host) << " pid " << p.pid;
  if (p.rank >= 0) out << " rank " << p.rank;
  out << ": " << p.files.size() << (p.files.size() == 1 ? " file" : " files");
  if (p.files.size() > 1) {
    out << " (segments";
    for (size_t i : p.files) out << " " << run.files[i].segment;
    out << ")";
  }
  out << ", " << format_bytes(p.disk_bytes);
  if (p.ring_discarded > 0)
    out << ", " << p.ring_discarded << " events discarded with deleted segments";
  out << "\n";
}

void print_totals(std::ostream& out, const RunSummary& run) {
  out << "run: " << run.files.size() << " files (" << run.files_complete << " complete, "
      << run.files_cut << " cut, " << run.files_error << " unreadable), " << run.processes.size()
      << " processes, " << run.events << " events\n";
  out << "drops: buffer " << run.buffer_dropped << ", disk budget " << run.disk_dropped
      << ", ring discarded " << run.ring_discarded << "\n";
  out << "disk: " << format_bytes(run.disk_bytes) << " used";
  if (run.disk_budget_bytes > 0) {
    out << " of a " << format_bytes(run.disk_budget_bytes) << " budget";
    if (run.processes_without_budget > 0)
      out << " (" << run.processes_without_budget << " processes had no limit)";
  } else {
    out << " (no disk budget recorded)";
  }
  out << "\n";
}

}  // namespace

void print_file_summary(std::ostream& out, const FileSummary& f) {
  out << f.path << "\n";
  if (f.header_valid) out << "  process   " << identity_line(f) << "\n";
  out << "  status    " << status_line(f) << "\n";
  out << "  size      " << format_bytes(f.file_bytes) << "\n";
  if (!f.header_valid) return;
  print_events(out, f);
  print_tracks(out, f);
  print_drops(out, f);
  for (const auto& w : f.warnings) out << "  warning   " << w << "\n";
}

void print_run_summary(std::ostream& out, const RunSummary& run) {
  for (const auto& f : run.files) {
    print_file_summary(out, f);
    out << "\n";
  }
  if (!run.processes.empty()) {
    out << "processes:\n";
    for (const auto& p : run.processes) print_process(out, run, p);
    out << "\n";
  }
  print_totals(out, run);
}

}  // namespace stallscope::reader
