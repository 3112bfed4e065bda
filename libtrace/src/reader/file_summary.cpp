// Summaries for `stallscope info`: one streaming pass per file, then
// grouping by process and run totals.
#include "stallscope/file_summary.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

namespace stallscope::reader {

namespace {

void copy_header_facts(const TraceReader& r, FileSummary& f) {
  const auto& h = r.header();
  f.pid = h.pid;
  f.parent_pid = h.parent_pid;
  f.segment = h.segment;
  f.ring_segment = (h.flags & format::kFileRingSegment) != 0;
  f.ring_discarded = h.ring_discarded;
  f.header_valid = true;
  f.version_major = h.version_major;
  f.version_minor = h.version_minor;
  f.host = r.host();
  f.rank = r.rank();
  f.file_bytes = r.file_bytes();
  // config.max_mb is the recorder's per-process disk budget (0 = unlimited).
  if (auto mb = r.metadata_value("/config/max_mb")) {
    const bool digits =
        !mb->empty() && mb->size() < 12 &&
        std::all_of(mb->begin(), mb->end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) {
      f.disk_budget_bytes = std::stoull(*mb) << 20;
    } else {
      f.warnings.push_back(r.path() + ": metadata config.max_mb is not a whole number: " + *mb);
    }
  }
}

void copy_tracks(const TraceReader& r, FileSummary& f,
                 std::unordered_map<uint32_t, size_t>& index) {
  for (const auto& t : r.tracks()) {
    index.emplace(t.track_id, f.tracks.size());
    f.tracks.push_back(
        {t.track_id, true, t.type, t.tid, t.device, std::string(r.string(t.name_id))});
  }
}

void copy_end_totals(const TraceReader& r, FileSummary& f) {
  const EndTotals& end = r.end();
  f.has_end = end.present;
  if (!end.present) return;
  uint64_t disk = 0;
  for (const auto& t : end.tracks) {
    f.end_dropped_buffer += t.dropped_buffer;
    f.end_written += t.written;
    disk += t.dropped_disk;
  }
  f.end_dropped_disk = std::max<uint64_t>(end.summary.disk_dropped, disk);
}

TrackSummary& track_for(FileSummary& f, std::unordered_map<uint32_t, size_t>& index,
                        uint32_t track_id) {
  auto [it, added] = index.emplace(track_id, f.tracks.size());
  if (added) f.tracks.push_back({track_id, false});
  return f.tracks[it->second];
}

void stream_events(TraceReader& r, FileSummary& f, std::unordered_map<uint32_t, size_t>& index) {
  Event e;
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  TrackSummary* cur = nullptr;  // blocks hold runs of one track: skip most lookups
  while (r.next(e)) {
    ++f.events;
    ++f.events_by_kind[e.kind];
    first = std::min(first, e.ts_ns);
    last = std::max(last, e.end_ns());
    if (cur == nullptr || cur->track_id != e.track_id) cur = &track_for(f, index, e.track_id);
    ++cur->events;
    if (e.kind_enum() == format::Kind::kGap) {
      cur->gap_dropped += e.value;
      f.gap_dropped += e.value;
    }
  }
  if (f.events > 0) {
    f.first_ns = first;
    f.last_ns = last;
    f.first_real_ns = r.to_real_ns(first);
  }
}

}  // namespace

FileSummary summarize_file(TraceReader& r) {
  FileSummary f;
  f.path = r.path();
  std::unordered_map<uint32_t, size_t> index;
  if (r.header_valid()) {
    copy_header_facts(r, f);
    copy_tracks(r, f, index);
    copy_end_totals(r, f);
  }
  stream_events(r, f, index);
  f.status = r.status();
  f.error = r.error();
  f.lost_bytes = r.lost_bytes();
  f.skipped = r.skipped();
  for (const auto& d : r.diagnostics())
    if (d.level == Diagnostic::Level::kWarning) f.warnings.push_back(d.message);
  return f;
}

FileSummary summarize_file(const std::string& path) {
  TraceReader r(path);
  return summarize_file(r);
}

namespace {

void add_file_totals(RunSummary& run, const FileSummary& f) {
  switch (f.status) {
    case Status::kComplete:
      ++run.files_complete;
      break;
    case Status::kTruncated:
      ++run.files_cut;
      break;
    case Status::kError:
      ++run.files_error;
      break;
  }
  run.events += f.events;
  run.buffer_dropped += f.buffer_dropped();
  run.disk_dropped += f.end_dropped_disk;
  run.disk_bytes += f.file_bytes;
}

// Groups files by (host, pid); files whose header could not be read stand alone.
void group_processes(RunSummary& run) {
  std::map<std::pair<std::string, uint32_t>, size_t> by_key;
  for (size_t i = 0; i < run.files.size(); ++i) {
    const FileSummary& f = run.files[i];
    if (!f.header_valid) continue;  // no process to name
    auto [it, added] = by_key.emplace(std::make_pair(f.host, f.pid), run.processes.size());
    if (added) run.processes.push_back({f.host, f.pid, f.rank});
    ProcessSummary& p = run.processes[it->second];
    p.files.push_back(i);
    p.ring_discarded = std::max(p.ring_discarded, f.ring_discarded);
    p.disk_bytes += f.file_bytes;
    p.disk_budget_bytes = std::max(p.disk_budget_bytes, f.disk_budget_bytes);
  }
  for (auto& p : run.processes) {
    std::sort(p.files.begin(), p.files.end(),
              [&](size_t a, size_t b) { return run.files[a].segment < run.files[b].segment; });
    run.ring_discarded += p.ring_discarded;
    if (p.disk_budget_bytes > 0) {
      run.disk_budget_bytes += p.disk_budget_bytes;
    } else {
      ++run.processes_without_budget;
    }
  }
  std::sort(run.processes.begin(), run.processes.end(), [](const auto& a, const auto& b) {
    return std::tie(a.host, a.rank, a.pid) < std::tie(b.host, b.rank, b.pid);
  });
}

}  // namespace

RunSummary summarize_run(const std::vector<std::string>& paths, const FileProgress& progress) {
  RunSummary run;
  run.files.reserve(paths.size());
  for (const auto& p : paths) {
    if (progress) progress(run.files.size(), paths.size(), p);
    run.files.push_back(summarize_file(p));
    add_file_totals(run, run.files.back());
  }
  group_processes(run);
  return run;
}

}  // namespace stallscope::reader
