// Chrome trace-event export: resolves the time window, groups files by
// process (ring segments in order) and streams every event through
// ChromeWriter into the JSON output.
#include "stallscope/chrome_export.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "reader/chrome_writer.hpp"
#include "reader/reader_impl.hpp"       // kMaxAbsNs
#include "stallscope/file_summary.hpp"  // format_bytes

namespace stallscope::reader {

namespace {

constexpr uint64_t kJsonBytesPerPayloadByte = 6;  // ~190 JSON bytes per 32-byte record

// 'text' (built with +=: GCC 12 gives a false -Wrestrict for "'" + string).
std::string quoted(std::string_view text) {
  std::string q = "'";
  q += text;
  q += "'";
  return q;
}

bool parse_u64(std::string_view s, uint64_t& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

}  // namespace

bool parse_time_bound(std::string_view text, TimeBound& out, std::string* error) {
  std::string_view s = text;
  out = {};
  out.absolute = !s.empty() && s.front() == '@';
  if (out.absolute) s.remove_prefix(1);
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  double scale = 1.0;
  for (const auto& [suffix, factor] : kUnits) {
    const std::string_view u(suffix);
    if (s.size() > u.size() && s.substr(s.size() - u.size()) == u) {
      scale = factor;
      s.remove_suffix(u.size());
      break;
    }
  }
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  const double ns = v * scale;
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || !(ns >= 0.0) ||
      ns > static_cast<double>(kMaxAbsNs)) {
    *error = quoted(text) +
             " is not a time: use ns or a unit (250us, 1.5ms, 2s), '@' for absolute monotonic ns";
    return false;
  }
  out.ns = static_cast<int64_t>(std::llround(ns));
  return true;
}

bool parse_step_range(std::string_view text, std::pair<uint64_t, uint64_t>& out,
                      std::string* error) {
  const size_t colon = text.find(':');
  const std::string_view a = text.substr(0, colon);
  const std::string_view b = colon == std::string_view::npos ? a : text.substr(colon + 1);
  if (!parse_u64(a, out.first) || !parse_u64(b, out.second) || out.first > out.second) {
    *error = quoted(text) + " is not a step range: use A:B with A <= B (or one step A)";
    return false;
  }
  return true;
}

namespace {

// First start and last end of steps [a, b] in every file; false when none.
bool find_step_window(const std::vector<TraceReader*>& files, std::pair<uint64_t, uint64_t> steps,
                      int64_t& from, int64_t& to) {
  from = kMaxAbsNs;
  to = -kMaxAbsNs;
  int64_t last_begin = -kMaxAbsNs;
  bool found = false;
  Event e;
  for (TraceReader* r : files) {
    while (r->next(e)) {
      if (e.kind_enum() != format::Kind::kStep) continue;
      // The recorder puts the index in StepExt and in corr (End records: corr only).
      const uint64_t index = e.has(format::Ext::kStep) ? e.step.index : e.corr;
      if (index < steps.first || index > steps.second) continue;
      found = true;
      if (e.phase != format::kEnd) from = std::min(from, e.ts_ns);
      if (e.phase != format::kBegin) to = std::max(to, e.end_ns());
      if (e.phase == format::kBegin) last_begin = std::max(last_begin, e.ts_ns);
    }
    r->rewind();
  }
  if (last_begin > to) to = kMaxAbsNs;       // the last step never ended: keep the rest
  if (from == kMaxAbsNs) from = -kMaxAbsNs;  // only End records: open start
  return found;
}

bool resolve_window(const std::vector<TraceReader*>& files, const ChromeExportOptions& opt,
                    ChromeExportResult& res) {
  const auto resolve = [&](const TimeBound& b) {
    return b.absolute ? b.ns : res.base_mono_ns + b.ns;
  };
  res.from_ns = opt.from ? resolve(*opt.from) : -kMaxAbsNs;
  res.to_ns = opt.to ? resolve(*opt.to) : kMaxAbsNs;
  if (opt.steps) {
    int64_t from = 0, to = 0;
    if (!find_step_window(files, *opt.steps, from, to)) {
      res.errors.push_back("no step events with an index in " + std::to_string(opt.steps->first) +
                           ":" + std::to_string(opt.steps->second) + " in the " +
                           std::to_string(files.size()) + " readable files");
      return false;
    }
    res.from_ns = std::max(res.from_ns, from);
    res.to_ns = std::min(res.to_ns, to);
  }
  if (res.from_ns > res.to_ns) {
    res.errors.push_back("the time window is empty: it starts after it ends");
    return false;
  }
  return true;
}

void warn_estimate(const std::vector<TraceReader*>& files, const ChromeExportOptions& opt,
                   ChromeExportResult& res) {
  if (opt.from || opt.to || opt.steps) return;  // a window: no cheap estimate
  uint64_t payload = 0;
  for (const TraceReader* r : files) payload += r->event_payload_bytes();
  const uint64_t estimate = payload * kJsonBytesPerPayloadByte;
  if (estimate > opt.size_warning_bytes)
    res.warnings.push_back("the export will be about " + format_bytes(estimate) +
                           ", more than a browser opens (~" + format_bytes(opt.size_warning_bytes) +
                           "): narrow it with --from/--to or --steps");
}

// Files grouped by (host, pid), each group in segment order; groups by rank.
std::vector<std::vector<TraceReader*>> group_by_process(const std::vector<TraceReader*>& files) {
  std::map<std::pair<std::string, uint32_t>, std::vector<TraceReader*>> groups;
  for (TraceReader* r : files) groups[{r->host(), r->header().pid}].push_back(r);
  std::vector<std::vector<TraceReader*>> out;
  for (auto& [key, g] : groups) {
    std::sort(g.begin(), g.end(),
              [](auto* a, auto* b) { return a->header().segment < b->header().segment; });
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.front()->rank() < b.front()->rank();
  });
  return out;
}

void stream_file(TraceReader& r, detail::ChromeWriter& w, detail::JsonOut& json,
                 const ChromeExportOptions& opt, ChromeExportResult& res, bool& size_warned) {
  const auto check_size = [&] {
    if (size_warned || json.bytes() <= opt.size_warning_bytes) return;
    size_warned = true;
    res.warnings.push_back("the export passed " + format_bytes(opt.size_warning_bytes) +
                           " while writing " + r.path() +
                           ": a browser may not open it; narrow it with --from/--to or --steps");
  };
  Event e;
  uint64_t n = 0;
  while (r.next(e)) {
    w.event(r, e);
    if ((++n & 4095) == 0) check_size();
  }
  check_size();
}

void collect_diagnostics(const std::vector<TraceReader>& readers, ChromeExportResult& res) {
  for (const TraceReader& r : readers) {
    for (const auto& d : r.diagnostics()) {
      auto& list = d.level == Diagnostic::Level::kError ? res.errors : res.warnings;
      list.push_back(d.message);
    }
  }
}

std::string describe(const TraceReader& r) {
  return r.path() + " (pid " + std::to_string(r.header().pid) + ")";
}

}  // namespace

ChromeExportResult export_chrome(std::vector<TraceReader>& readers, std::ostream& out,
                                 const ChromeExportOptions& opt) {
  ChromeExportResult res;
  std::vector<TraceReader*> files;
  for (auto& r : readers)
    if (r.header_valid()) files.push_back(&r);
  res.base_mono_ns = kMaxAbsNs;
  for (const TraceReader* r : files)
    res.base_mono_ns =
        std::min(res.base_mono_ns, std::clamp(r->start_mono_ns(), -kMaxAbsNs, kMaxAbsNs));
  if (files.empty()) res.base_mono_ns = 0;
  detail::JsonOut json(out);
  const bool window_ok = resolve_window(files, opt, res);
  detail::ChromeWriter w(json, res, res.base_mono_ns, res.from_ns, res.to_ns);
  w.write_prologue(files);
  if (window_ok) {
    warn_estimate(files, opt, res);
    std::set<uint32_t> used_pids;
    bool size_warned = false;
    size_t done = 0;
    for (const auto& group : group_by_process(files)) {
      uint32_t pid = group.front()->header().pid;
      while (!used_pids.insert(pid).second) pid += 1000000;  // same pid on another host
      w.begin_process(*group.front(), pid);
      for (TraceReader* r : group) {
        if (opt.progress) opt.progress(done++, files.size(), r->path());
        w.name_tracks(*r);
        stream_file(*r, w, json, opt, res, size_warned);
      }
      w.end_process(describe(*group.front()));
    }
    if (opt.extra_events) {
      std::vector<uint32_t> pids(used_pids.begin(), used_pids.end());
      ChromeEventSink sink(w, pids);
      opt.extra_events(sink);
    }
  }
  w.write_epilogue();
  json.flush();
  res.bytes = json.bytes();
  collect_diagnostics(readers, res);
  if (json.failed()) res.errors.push_back("writing the JSON output failed");
  return res;
}

ChromeExportResult export_chrome(const std::vector<std::string>& paths, std::ostream& out,
                                 const ChromeExportOptions& opt) {
  std::vector<TraceReader> readers;
  readers.reserve(paths.size());
  for (const auto& p : paths) readers.emplace_back(p);
  return export_chrome(readers, out, opt);
}

}  // namespace stallscope::reader
