// Files in: groups trace files by rank, streams each rank's files through
// one engine in approximate time order (the file that is furthest behind is
// read next), and tells the engine how far every file has advanced.
#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "convert.hpp"
#include "engine.hpp"
#include "kineto/kineto.hpp"
#include "probes.hpp"
#include "remedy.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/multirank.hpp"

namespace stallscope::analyzer {

namespace {

constexpr size_t kBatchEvents = 4096;

// The extensions convert() reads; the reader skips the others (Device, Api,
// Range) without copying them. A stack sample's frames stay unread.
constexpr uint32_t kWantedExts =
    reader::ext_bit(format::Ext::kIo) | reader::ext_bit(format::Ext::kWork) |
    reader::ext_bit(format::Ext::kCopy) | reader::ext_bit(format::Ext::kStep) |
    reader::ext_bit(format::Ext::kCollective) | reader::ext_bit(format::Ext::kIdList) |
    reader::ext_bit(format::Ext::kSample) | reader::ext_bit(format::Ext::kLoaderConfig) |
    reader::ext_bit(format::Ext::kBatchHandoff) | reader::ext_bit(format::Ext::kChannelHandoff) |
    reader::ext_bit(format::Ext::kStackSample);

struct Source {
  std::unique_ptr<reader::TraceReader> r;
  std::unique_ptr<FileConverter> conv;
  int64_t frontier = INT64_MIN;  // the latest end read
  int64_t first_end = INT64_MIN;  // the first end read
  int64_t late = 0;  // the most an end came behind the frontier
  bool done = false;
  uint64_t gaps = 0;
};

struct RankGroup {
  int64_t rank = -1;
  std::string host;
  std::vector<std::unique_ptr<reader::TraceReader>> readers;
};

std::vector<RankGroup> group_by_rank(std::vector<std::unique_ptr<reader::TraceReader>> readers) {
  std::map<std::pair<int64_t, std::string>, RankGroup> groups;
  for (auto& r : readers) {
    // Processes without a rank (one-process runs) group by host.
    auto& g = groups[{r->rank(), r->rank() < 0 ? r->host() : std::string()}];
    g.rank = r->rank();
    g.host = r->host();
    g.readers.push_back(std::move(r));
  }
  std::vector<RankGroup> out;
  for (auto& [k, g] : groups) out.push_back(std::move(g));
  return out;
}

// Reads up to kBatchEvents from one source into the engine.
void pump(Source& s, RankEngine& eng, reader::RecordView& e) {
  for (size_t n = 0; n < kBatchEvents; ++n) {
    if (!s.r->next(e, kWantedExts)) {
      s.done = true;
      return;
    }
    const Ev& ev = s.conv->convert(e);
    if (ev.kind == Kind::kGap) s.gaps += ev.corr;
    if (ev.kind == Kind::kCounter || ev.kind == Kind::kGap) {
      eng.ingest(ev, {});
      continue;
    }
    if (ev.end < s.frontier) {
      s.late = std::max(s.late, s.frontier - ev.end);
    } else {
      if (s.frontier == INT64_MIN) s.first_end = ev.end;
      s.frontier = ev.end;
    }
    eng.ingest(ev, e.ids);
  }
}

Source* furthest_behind(std::vector<Source>& srcs) {
  Source* best = nullptr;
  for (auto& s : srcs)
    if (!s.done && (best == nullptr || s.frontier < best->frontier)) best = &s;
  return best;
}

// How long to wait behind the files' frontiers (AnalyzeOptions::lag_ns):
// the maximum until min(lag_ns, 4 × min_lag_ns) of some file has been
// read, then 4 × the lateness seen so far, within [min_lag_ns, lag_ns].
int64_t current_lag(const std::vector<Source>& srcs, const AnalyzeOptions& o) {
  if (!o.adaptive_lag) return o.lag_ns;
  const int64_t settle = std::min(o.lag_ns, 4 * o.min_lag_ns);
  bool settled = false;
  int64_t late = 0;
  for (const auto& s : srcs) {
    settled = settled || (s.frontier != INT64_MIN && s.frontier - s.first_end >= settle);
    late = std::max(late, s.late);
  }
  if (!settled) return o.lag_ns;
  return std::clamp(late > o.lag_ns / 4 ? o.lag_ns : 4 * late, std::min(o.min_lag_ns, o.lag_ns), o.lag_ns);
}

int64_t safe_time(const std::vector<Source>& srcs, int64_t lag) {
  int64_t t = INT64_MAX;
  for (const auto& s : srcs)
    if (!s.done) t = std::min(t, s.frontier == INT64_MIN ? INT64_MIN : s.frontier - lag);
  return t;
}

Drops file_drops(const Source& s) {
  Drops d;
  const auto& end = s.r->end();
  uint64_t end_buffer = 0, end_disk = end.present ? end.summary.disk_dropped : 0;
  for (const auto& t : end.tracks) {
    end_buffer += t.dropped_buffer;
    end_disk = std::max<uint64_t>(end_disk, t.dropped_disk);
  }
  d.buffer_dropped = end_buffer > s.gaps ? end_buffer - s.gaps : 0;  // gaps counted by the engine
  d.disk_dropped = end_disk;
  if (s.r->header_valid()) d.ring_discarded = s.r->header().ring_discarded;
  d.files_truncated = s.r->status() == reader::Status::kTruncated ? 1 : 0;
  d.files_error = s.r->status() == reader::Status::kError ? 1 : 0;
  return d;
}

void report_file(const Source& s, RankEngine& eng) {
  eng.add_drops(file_drops(s));
  size_t shown = 0;
  for (const auto& d : s.r->diagnostics())
    if (shown++ < 5) eng.warn(d.message);
  if (s.r->status() == reader::Status::kTruncated)
    eng.warn(s.r->path() + ": truncated (cut or still being written): analyzed up to the cut");
}

RankReport analyze_group(RankGroup& g, const AnalyzeOptions& opt, const Progress& progress,
                         int ranks_on_host, const HostTopology& host) {
  RankTrace meta;
  meta.rank = g.rank;
  meta.probes.ranks_on_node = ranks_on_host;
  meta.probes.gpus = host.gpus;  // the host's topology, whichever process recorded it
  meta.probes.host_numa_nodes = host.numa_nodes;
  std::vector<Source> srcs;
  RankScope scope(meta);
  for (auto& r : g.readers) {
    meta.procs.push_back(process_of(*r));
    merge_probes(*r, meta.probes);
    Source s;
    s.conv = std::make_unique<FileConverter>(*r, scope, static_cast<uint32_t>(meta.procs.size() - 1));
    s.r = std::move(r);
    srcs.push_back(std::move(s));
  }
  AnalyzeOptions o = opt;
  if (meta.probes.sample_period_ns > 0) o.sample_period_ns = meta.probes.sample_period_ns;
  RankEngine eng(meta, o);
  for (const auto& w : meta.probes.warnings) eng.warn(w);
  reader::RecordView e;
  while (Source* s = furthest_behind(srcs)) {
    pump(*s, eng, e);
    eng.advance(safe_time(srcs, current_lag(srcs, o)));
    progress.tick(*s->r, e.offset);
  }
  for (const auto& s : srcs) report_file(s, eng);
  RankReport rep = eng.finish();
  rep.host = g.host;
  if (!srcs.empty()) {  // the wall clock the cross-rank pass starts from
    const int64_t t0 = srcs.front().r->start_mono_ns();
    rep.realtime_offset_ns = srcs.front().r->to_real_ns(t0) - t0;
    rep.realtime_known = rep.realtime_offset_ns != 0;  // 0: the file holds no clock triple
  }
  for (const auto& p : meta.procs) rep.files.push_back(p.file);
  release_tables(rep);  // until the cross-rank pass and the reports read them
  return rep;
}

void count_ranks_per_host(std::vector<RankGroup>& groups, std::map<std::string, int>& per_host) {
  for (const auto& g : groups) ++per_host[g.host];
}

// One process per host records the topology: every rank of the host uses it.
std::map<std::string, HostTopology> topology_per_host(const std::vector<RankGroup>& groups) {
  std::map<std::string, HostTopology> out;
  for (const auto& g : groups)
    for (const auto& r : g.readers)
      if (out[g.host].empty()) out[g.host] = host_topology(*r);
  return out;
}

// Each rank on its own engine, readers and trace: nothing is shared but the
// output slots and the progress count.
void analyze_groups_parallel(std::vector<RankGroup>& groups, const AnalyzeOptions& opt,
                             const Progress& progress,
                             const std::map<std::string, int>& per_host,
                             const std::map<std::string, HostTopology>& gpus,
                             std::vector<RankReport>& out) {
  const size_t at = out.size();
  out.resize(at + groups.size());
  tbb::task_arena arena(opt.rank_threads == 0 ? tbb::task_arena::automatic : static_cast<int>(opt.rank_threads));
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, groups.size(), [&](size_t i) {
      out[at + i] = analyze_group(groups[i], opt, progress, per_host.at(groups[i].host),
                                  gpus.at(groups[i].host));
    });
  });
}

}  // namespace

Report analyze_paths(const std::vector<std::string>& paths, const AnalyzeOptions& opt) {
  Report rep;
  rep.inputs = paths;
  // PyTorch profiler traces (detected by content) become ranks here, one
  // file in memory at a time; the rest is ours.
  const std::vector<std::string> own_paths = kineto::import_each(
      paths, opt.max_json_bytes, rep.errors,
      [&](kineto::ImportedRank&& r) { rep.ranks.push_back(analyze_imported(r, opt)); });
  std::vector<std::unique_ptr<reader::TraceReader>> readers;
  for (const auto& p : own_paths) {
    std::string error;
    const auto files = reader::list_trace_files(p, &error);
    if (files.empty()) rep.errors.push_back(error.empty() ? p + ": no trace files" : error);
    for (const auto& f : files) {
      auto r = std::make_unique<reader::TraceReader>(f);
      if (!r->header_valid()) {
        rep.errors.push_back(r->error().empty() ? f + ": not a trace file" : r->error());
        continue;
      }
      readers.push_back(std::move(r));
    }
  }
  Progress progress(opt.progress, readers);
  auto groups = group_by_rank(std::move(readers));
  std::map<std::string, int> per_host;
  count_ranks_per_host(groups, per_host);
  const auto gpus = topology_per_host(groups);
  if (opt.rank_threads == 1 || groups.size() < 2) {
    for (auto& g : groups)
      rep.ranks.push_back(analyze_group(g, opt, progress, per_host[g.host], gpus.at(g.host)));
  } else {
    analyze_groups_parallel(groups, opt, progress, per_host, gpus, rep.ranks);
  }
  progress.finish();
  attribute_node_cpu(rep);
  analyze_cross_rank(rep, {});
  for (const auto& r : rep.ranks) release_tables(r);
  if (const std::string why = spill::Arena::instance().failure(); !why.empty())
    rep.warnings.push_back(why + ": the step and collective tables stay in memory, which grows "
                           "with the run's length (set TMPDIR to a writable directory)");
  return rep;
}

RankReport analyze_imported(const kineto::ImportedRank& imp, const AnalyzeOptions& opt) {
  RankReport r = analyze_rank(imp.trace, opt);
  r.rank = imp.rank;
  r.files = {imp.file};
  // Trace ns + baseTimeNanoseconds = wall clock: what the cross-rank pass aligns on.
  r.realtime_offset_ns = imp.base_time_ns;
  r.realtime_known = imp.base_time_ns != 0;
  return r;
}

RankReport analyze_rank(const RankTrace& trace, const AnalyzeOptions& opt) {
  AnalyzeOptions o = opt;
  if (trace.probes.sample_period_ns > 0) o.sample_period_ns = trace.probes.sample_period_ns;
  RankEngine eng(trace, o);
  // Arrival order of a recorder: by end time (complete records are written when they end).
  std::vector<size_t> order(trace.events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return trace.events[a].end < trace.events[b].end; });
  for (size_t i : order) {
    const Ev& e = trace.events[i];
    if (e.kind == Kind::kBatchReady)
      eng.ingest(e, std::span<const uint64_t>(trace.ids.data() + e.work().ids_at, e.work().ids_n));
    else
      eng.ingest(e, {});
  }
  return eng.finish();
}

}  // namespace stallscope::analyzer
