// The terminal report: one screen per rank — summary line, step source,
// per-part table, stages, CPU budget, top remedies, outliers, drops and
// warnings. Plain text unless colors are asked for.
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "multirank/cross_render.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"
#include "stallscope/file_summary.hpp"  // terminal_safe

namespace stallscope::analyzer {

namespace {

struct Style {
  bool on;
  const char* bold() const { return on ? "\033[1m" : ""; }
  const char* red() const { return on ? "\033[31m" : ""; }
  const char* green() const { return on ? "\033[32m" : ""; }
  const char* dim() const { return on ? "\033[2m" : ""; }
  const char* off() const { return on ? "\033[0m" : ""; }
};

std::string f(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

void header(std::ostream& o, const RankReport& r, const Style& s) {
  // A run without ranks (no launcher set one) is one process tree.
  o << s.bold() << "stallscope report" << s.off() << " — ";
  if (r.rank >= 0) o << "rank " << r.rank;
  else o << "single process";
  if (!r.host.empty()) o << " on " << r.host;
  o << " (" << r.files.size() << " file" << (r.files.size() == 1 ? "" : "s") << ", " << r.events
    << " events)\n";
  const bool bad = r.cause.rfind("compute-bound", 0) != 0;
  o << (bad ? s.red() : s.green()) << s.bold() << r.summary << s.off() << "\n";
  o << "steps: " << r.steps.size() << " from " << step_source_key(r.source);
  if (!r.source_detail.empty()) o << " (" << r.source_detail << ")";
  o << ", " << r.warmup_steps << " warm-up excluded; trainer tid " << r.trainer_tid
    << "; compute basis: " << r.compute_basis << "\n";
}

void parts_table(std::ostream& o, const RankReport& r, const Style& s) {
  o << s.bold() << "part                   p50 ms    p90 ms       %" << s.off() << "\n";
  for (size_t p = 0; p < kPartCount; ++p) {
    const PartStat& st = r.parts[p];
    if (st.total_ns == 0 && p != idx(Part::kCompute)) continue;
    char line[160];
    std::snprintf(line, sizeof line, "%-20s %9.2f %9.2f %6.1f %%\n",
                  std::string(part_label(static_cast<Part>(p))).c_str(), st.p50_ms, st.p90_ms,
                  st.share * 100);
    o << line;
  }
  char line[160];
  std::snprintf(line, sizeof line, "%-20s %9.2f %9.2f  100.0 %%\n", "step", r.step_p50_ms, r.step_p90_ms);
  o << s.dim() << line << s.off();
  if (r.split != 0) {
    o << "data stall split: " << ((r.split & kSplitExact) ? "exact (DataLoader records) " : "")
      << ((r.split & kSplitLineage) ? "lineage chain walk " : "")
      << ((r.split & kSplitInferred) ? "inferred from producer activity " : "")
      << ((r.split & kSplitNone) ? "unsplit (no producer data)" : "") << "\n";
  }
}

// The comm stage's bus bandwidth (docs/gpu.md): ", bus bandwidth 3.4 GB/s
// (1.2 GB/s at 32 MiB and more) over 24 collective kernel(s)".
std::string comm_numbers(const Stage& st) {
  const double bus = st.figure(Fig::kBusBandwidth).value_or(0),
               large_bus = st.figure(Fig::kLargeBusBandwidth).value_or(0),
               kernels = st.figure(Fig::kCollectiveKernels).value_or(0),
               large = st.figure(Fig::kLargeCollectiveKernels).value_or(0),
               unjoined = st.figure(Fig::kUnjoinedCollectiveKernels).value_or(0);
  std::string out = f(", bus bandwidth %.1f GB/s", bus / 1e9);
  if (large > 0) out += f(" (%.1f GB/s at 32 MiB and more)", large_bus / 1e9);
  out += f(" over %.0f collective kernel(s)", kernels);
  if (unjoined > 0) out += f("; %.0f NCCL kernel(s) not tied to their call", unjoined);
  return out;
}

void stages(std::ostream& o, const RankReport& r) {
  for (const auto& st : r.stages) {
    if (!st.measured) continue;
    o << "stage " << st.name()
      << f(": utilization %.0f %%, capacity %.1f/s vs demand %.1f/s", st.utilization * 100, st.capacity, st.demand)
      << f(" (headroom %.2fx)", st.headroom());
    if (st.kind == StageKind::kComm) o << comm_numbers(st);
    o << "\n";
  }
  const CpuBudget& c = r.cpu;
  if (!c.known) return;
  o << f("cpu: budget %.1f cores (affinity %.0f", c.budget_cores, c.affinity_cpus);
  if (c.quota_cores > 0) o << f(", quota %.1f", c.quota_cores);
  o << ", " << c.ranks_on_node << " rank(s) on node)" << f(", used %.1f", c.used_cores);
  if (c.other_ranks_cores >= 0) o << f(" (the node's other ranks %.1f)", c.other_ranks_cores);
  if (c.idle_during_stalls >= 0) o << f(", idle during stalls %.1f", c.idle_during_stalls);
  if (c.throttled_periods > 0) o << f(", throttled %.0f periods (%.0f ms)", c.throttled_periods, c.throttled_ms);
  if (c.demand > 0)
    o << f("; utilization %.0f %%, capacity %.1f/s vs demand %.1f/s", c.utilization * 100,
           c.capacity, c.demand)
      << f(" (headroom %.2fx)", c.headroom());
  o << "\n";
}

std::string ms_or(double v, const char* fmt) { return v >= 0 ? f(fmt, v) : std::string("?"); }

void loader_config(std::ostream& o, const DataLoaderReport& l) {
  o << "DataLoader";
  if (!l.site.empty()) o << " at " << l.site;
  o << (l.fed_optimizer ? " (fed the optimizer)" : " (not inside steps)") << ": "
    << (l.dataset.empty() ? "dataset ?" : l.dataset) << " (" << l.dataset_kind;
  if (l.dataset_len > 0) o << ", " << l.dataset_len << " items";
  if (l.getitems) o << ", __getitems__";
  o << "), batch_size " << (l.batch_size > 0 ? std::to_string(l.batch_size) : "None")
    << ", num_workers " << l.num_workers;
  if (l.num_workers > 0) o << ", prefetch_factor " << l.prefetch_factor;
  o << ", pin_memory "
    << (l.pin_memory == "inactive" ? "asked for but inactive (torch turned it off)" : l.pin_memory)
    << ", persistent_workers " << (l.persistent_workers ? "on" : "off");
  if (l.num_workers > 0) o << ", " << l.mp_context;
  if (!l.sampler.empty()) o << "; sampler " << l.sampler;
  if (!l.batch_sampler.empty()) o << ", batch sampler " << l.batch_sampler;
  if (!l.collate.empty()) o << "; collate " << l.collate;
  if (l.overridden) o << "; a setting came from --set";
  o << "\n";
}

void loader_numbers(std::ostream& o, const DataLoaderReport& l) {
  const LoaderWaitSplit& w = l.split;
  o << "  batches " << l.batches << "; waits " << l.waits << " (" << l.waits_in_steps
    << " in steps) " << f("%.1f ms: storage %.1f, preprocessing %.1f", l.wait_ms, w.storage_ms, w.preprocess_ms)
    << f(", collate %.1f, waiting for a worker %.1f", w.collate_ms, w.worker_wait_ms)
    << f(", hand-off %.1f, head-of-line %.1f ms", w.handoff_ms, w.head_of_line_ms);
  if (w.unjoined_ms > 0) o << f(" (%.1f ms without worker records)", w.unjoined_ms);
  // An IterableDataset's items are next() calls, a map-style one's __getitem__.
  const char* item = l.dataset_kind == "iterable" ? "next()" : "__getitem__";
  o << "\n  per batch: fetch " << ms_or(l.fetch_ms, "%.2f ms") << ", " << item << " "
    << ms_or(l.getitem_ms, "%.3f ms") << " per sample, collate " << ms_or(l.collate_ms, "%.2f ms");
  if (l.num_workers > 0) o << ", hand-off " << ms_or(l.handoff_ms, "%.2f ms");
  if (l.consume_ms >= 0) o << f("; trainer %.2f ms per batch outside its waits", l.consume_ms);
  o << "\n";
  if (l.sample_spans_off)
    o << "  per-sample spans turned off in a process of it (items too cheap to time each): "
         "__getitem__ from the batches before\n";
  if (l.fetch_storage_share >= 0)
    o << f("  workers' fetch time: %.0f %% in storage reads", 100 * l.fetch_storage_share)
      << (l.fetch_cpu_share >= 0 ? f(", %.0f %% on CPU", 100 * l.fetch_cpu_share) : std::string())
      << "\n";
  if (!l.slow_samples.empty()) {
    o << "  slow samples: " << l.slow_sample_count
      << f(" of %.0f take 5x the median or more (median %.2f ms, p99 %.2f ms):",
           double(l.samples_timed), l.sample_p50_ms, l.sample_p99_ms);
    for (size_t i = 0; i < l.slow_samples.size(); ++i) {
      const auto& x = l.slow_samples[i];
      o << (i ? ", " : " ") << "index " << x.index << f(" %.1f ms", x.ms);
      if (x.times > 1) o << " (" << x.times << " times)";
      if (!x.file.empty()) o << " (" << x.file << ")";
    }
    o << "\n";
  }
  if (l.head_of_line_waits > 0)
    o << "  head-of-line: " << l.head_of_line_waits
      << f(" wait(s) while a later batch was ready (%.1f ms in all)", l.head_of_line_ready_ms) << "\n";
  for (const auto& wk : l.workers)
    o << "  " << (wk.worker < 0 ? std::string("trainer thread") : "worker " + std::to_string(wk.worker))
      << " (pid " << wk.pid << "): " << wk.batches << " batches, fetch " << ms_or(wk.fetch_ms, "%.2f ms")
      << ", " << item << " " << ms_or(wk.getitem_ms, "%.3f ms") << ", collate " << ms_or(wk.collate_ms, "%.2f ms") << "\n";
}

void loader_epochs(std::ostream& o, const DataLoaderReport& l) {
  if (l.epochs.empty()) return;
  o << "  epochs " << l.epochs.size() << ": start-up";
  bool restart = false;
  for (size_t i = 0; i < l.epochs.size() && i < 8; ++i) {
    o << (i == 0 ? " " : ", ") << ms_or(l.epochs[i].startup_ms, "%.1f ms");
    restart = restart || (i > 0 && l.epochs[i].workers_started);
  }
  if (l.epochs.size() > 8) o << ", …";
  if (restart) o << " (workers started again every epoch: persistent_workers is off)";
  o << "\n";
}

std::string bytes_text(double b) {
  if (b >= 1024.0 * 1024 * 1024) return f("%.1f GiB", b / 1024 / 1024 / 1024);
  if (b >= 1024.0 * 1024) return f("%.1f MiB", b / 1024 / 1024);
  return f("%.0f KiB", b / 1024);
}

// What limits more workers besides CPUs, as the hooks saw it (one line).
void loader_guards(std::ostream& o, const DataLoaderReport& l) {
  std::string s;
  if (l.shm_free_bytes >= 0)
    s += "/dev/shm " + bytes_text(l.shm_free_bytes) + " free" +
         (l.shm_total_bytes > 0 ? " of " + bytes_text(l.shm_total_bytes) : std::string());
  if (l.batch_bytes > 0)
    s += std::string(s.empty() ? "" : ", ") + "batch " + bytes_text(l.batch_bytes) +
         (l.batch_tensors > 0 ? f(" in %.0f tensor(s)", l.batch_tensors) : std::string());
  if (l.nofile_soft > 0)
    s += (s.empty() ? "" : "; ") + f("RLIMIT_NOFILE %.0f", l.nofile_soft) +
         (l.open_fds >= 0 ? f(" (%.0f open)", l.open_fds) : std::string()) +
         (l.sharing_strategy.empty() ? "" : ", sharing " + l.sharing_strategy);
  if (l.worker_threads > 0)
    s += (s.empty() ? "" : "; ") + f("%.0f threads per worker", l.worker_threads) +
         (l.worker_torch_threads > 0 ? f(" (torch %.0f)", l.worker_torch_threads) : std::string());
  if (!s.empty()) o << "  guard rails: " << s << "\n";
}

void dataloaders(std::ostream& o, const RankReport& r) {
  for (const auto& l : r.dataloaders) {
    loader_config(o, l);
    loader_numbers(o, l);
    loader_guards(o, l);
    loader_epochs(o, l);
  }
  for (size_t i = 0; i < r.settings.size(); ++i) {
    const SettingMark& m = r.settings[i];
    o << (i == 0 ? "settings tried:\n" : "") << "  " << m.status << " " << m.key << "=" << m.value;
    if (!m.site.empty()) o << " at " << m.site;
    if (!m.detail.empty()) o << (m.status == "applied" ? " (" + m.detail + ")" : ": " + m.detail);
    o << "\n";
  }
  for (size_t i = 0; i < r.phases.size(); ++i)
    o << (i == 0 ? "phases (outside steps): " : "; ") << r.phases[i].name << " "
      << r.phases[i].count << f("x, %.1f ms in all", r.phases[i].total_ms) << (i + 1 == r.phases.size() ? "\n" : "");
}

// "producers: 2 processes -> multiprocessing queue -> trainer; 1.0 item
// per step, 196 KB each; per item 38.2 ms busy (on CPU 30.1, storage
// 8.1); the trainer waited 12.0 ms per hand-off" and one line per producer.
void feed(std::ostream& o, const RankReport& r) {
  const FeedReport& fr = r.feed;
  if (!fr.found || !r.dataloaders.empty()) return;
  o << "producers: " << fr.path << f("; %.2f item(s) per step", fr.items_per_step);
  if (fr.bytes_per_item > 0) o << f(", %.0f KB per hand-off", fr.bytes_per_item / 1e3);
  if (fr.busy_ms_per_item >= 0) {
    o << f("; per item %.2f ms busy (on CPU %.2f, in storage reads %.2f", fr.busy_ms_per_item,
           fr.cpu_ms_per_item, fr.storage_ms_per_item);
    if (fr.other_ms_per_item > 0) o << f(", blocked elsewhere %.2f", fr.other_ms_per_item);
    o << ")";
  }
  o << f("; the trainer waited %.2f ms per hand-off\n", fr.wait_ms_per_handoff);
  const size_t shown = std::min<size_t>(fr.producers.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    const Producer& p = fr.producers[i];
    o << "  " << p.name << ": " << p.items << " item(s)";
    if (p.cpu_ms >= 0) o << f(", on CPU %.1f ms", p.cpu_ms);
    if (p.storage_ms > 0) o << f(", in storage reads %.1f ms", p.storage_ms);
    if (p.interval_ms > 0) o << f(", one every %.2f ms", p.interval_ms);
    o << "\n";
  }
  if (shown < fr.producers.size()) o << "  (" << fr.producers.size() - shown << " more)\n";
}

// What the host did in its device-idle gaps: per class ms per step and
// share, its top activities; the longest gaps. Shown when host time is.
void host_gaps(std::ostream& o, const RankReport& r) {
  const HostGapReport& g = r.host_gaps;
  if (!g.analyzed) {
    if (!g.note.empty() && r.parts[idx(Part::kHostCpu)].total_ns > 0) o << "host gaps: " << g.note << "\n";
    return;
  }
  if (g.host_ms <= 0) return;
  o << "host gaps" << f(" (%.2f ms per step, %.1f gaps):", g.host_ms, g.gap_count) << "\n";
  for (const GapClassStat& c : g.classes) {
    if (c.ms <= 0) continue;
    o << "  " << gap_class_key(c.cls) << f(" %.2f ms (%.1f %%)", c.ms, 100 * c.share);
    for (size_t i = 0; i < c.top.size() && i < 3; ++i)
      o << (i == 0 ? ": " : ", ") << c.top[i].name << f(" %.2f", c.top[i].ms);
    o << "\n";
  }
  if (!g.sync_call.empty())
    o << "  sync call: " << g.sync_call << (g.sync_made_by.empty() ? "" : " made by " + g.sync_made_by) << "\n";
  for (size_t i = 0; i < g.longest.size() && i < 3; ++i) {
    const HostGap& x = g.longest[i];
    o << (i == 0 ? "  longest: " : "; ") << "step " << x.step << f(" +%.2f ms %.2f ms ", x.start_ms, x.ms)
      << gap_class_key(x.cls) << (x.top.empty() ? "" : " (" + x.top + ")");
  }
  if (!g.longest.empty()) o << "\n";
}

// --headspace: this run's steps are the ceiling, or another run's are.
void headspace(std::ostream& o, const RankReport& r, const Style& s) {
  const Headspace& h = r.headspace;
  if (h.replayed) {
    o << s.bold() << "headspace run" << s.off() << ": each DataLoader's first " << h.batches
      << " batches handed out again (data for free"
      << (h.capped ? ", fewer kept: the byte cap" : "") << "): the step p50 "
      << f("%.2f ms", r.step_p50_ms)
      << " is the ceiling, no input remedy can bring the step below it (the " << h.steps_before
      << " step(s) before the replay are warm-up)\n";
  }
  if (h.ceiling_ms <= 0) return;
  o << s.bold() << "headspace" << s.off() << " (" << h.ceiling_from << "): step with data for free "
    << f("%.2f ms", h.ceiling_ms) << "; this run " << f("%.2f ms", r.step_p50_ms)
    << f(", of which data stall %.2f ms", data_stall_ms(r)) << "\n";
  if (h.loader_cost_ms > 0)
    o << "  finding: the loading slowed the trainer by " << f("%.2f ms", h.loader_cost_ms)
      << " per step beyond its waits (step - data stall "
      << f("%.2f ms", r.step_p50_ms - data_stall_ms(r)) << " against the ceiling "
      << f("%.2f ms", h.ceiling_ms) << "): CPU or memory bandwidth the loader takes\n";
}

void remedies(std::ostream& o, const RankReport& r, const TextOptions& opt, const Style& s) {
  if (r.remedies.empty()) return;
  o << s.bold() << "remedies" << s.off() << " (mean steady step " << f("%.2f ms", r.remedies[0].step_ms) << "):\n";
  for (size_t i = 0; i < r.remedies.size() && i < opt.max_remedies; ++i) {
    const Remedy& m = r.remedies[i];
    o << "  " << i + 1 << ". " << m.title << ": " << (m.bound ? "at best " : "")
      << f("%.2f ms (-%.1f %%)", m.predicted_step_ms,
           m.step_ms > 0 ? 100 * m.gain_ms() / m.step_ms : 0)
      << " [" << m.inputs_from << "]\n     " << s.dim() << m.evidence << s.off() << "\n";
    const char* label = m.knob_for == "program" ? "program: " : "PyTorch: ";
    if (m.loader_knob != "none") o << "     loader: " << m.loader_knob << " | " << label << m.pytorch_knob << "\n";
    else if (!m.pytorch_knob.empty()) o << "     " << label << m.pytorch_knob << "\n";
    if (const std::string t = try_command(m.settings, r.command); !t.empty()) o << "     try: " << t << "\n";
    if (r.headspace.ceiling_ms > 0 && remedy_family(m.kind) == RemedyFamily::kInput)
      o << "     ceiling: " << f("%.2f ms", r.headspace.ceiling_ms) << " measured with data for free"
        << (m.predicted_step_ms < r.headspace.ceiling_ms ? ", above this prediction" : "") << "\n";
  }
}

// What the rules considered and did not propose, with the reason.
void rejected(std::ostream& o, const RankReport& r, const Style& s) {
  if (r.rejected_remedies.empty()) return;
  o << s.bold() << "considered, not proposed" << s.off() << ":\n";
  for (const auto& x : r.rejected_remedies)
    o << "  - " << (x.title.empty() ? x.id : x.title) << ": " << s.dim() << x.reason << s.off() << "\n";
}

std::string top_part(const StepResult& st) {
  size_t best = 0;
  for (size_t p = 1; p < kPartCount; ++p) if (st.parts[p] > st.parts[best]) best = p;
  return std::string(part_label(static_cast<Part>(best))) +
         f(" %.0f %%", st.wall() > 0 ? 100.0 * double(st.parts[best]) / double(st.wall()) : 0);
}

void outliers(std::ostream& o, const RankReport& r, const TextOptions& opt) {
  size_t shown = 0;
  for (const auto& st : r.steps) {
    if (!st.outlier || shown >= opt.max_outliers) continue;
    o << (shown++ == 0 ? "outliers: " : "; ") << "step " << st.index << f(" %.1f ms", double(st.wall()) / 1e6)
      << " (" << top_part(st) << ")";
  }
  if (shown > 0) o << "\n";
}

void drops_and_warnings(std::ostream& o, const RankReport& r, const Style& s) {
  const Drops& d = r.drops;
  o << "drops: buffer " << d.buffer_dropped << ", disk " << d.disk_dropped << ", ring " << d.ring_discarded
    << "; files cut " << d.files_truncated << ", unreadable " << d.files_error << "\n";
  for (const auto& w : r.warnings) o << s.red() << "warning: " << s.off() << w << "\n";
}

void write_text_unescaped(std::ostream& out, const Report& r, const TextOptions& opt) {
  const Style s{opt.color};
  for (const auto& e : r.errors) out << s.red() << "error: " << s.off() << e << "\n";
  for (const auto& w : r.warnings) out << s.red() << "warning: " << s.off() << w << "\n";
  write_cross_text(out, r, opt.color);
  const std::vector<size_t> shown = shown_ranks(r);
  for (size_t i : shown) {
    const RankReport& rank = r.ranks[i];
    if (i != shown.front()) out << "\n";
    header(out, rank, s);
    parts_table(out, rank, s);
    stages(out, rank);
    dataloaders(out, rank);
    feed(out, rank);
    host_gaps(out, rank);
    headspace(out, rank, s);
    remedies(out, rank, opt, s);
    rejected(out, rank, s);
    outliers(out, rank, opt);
    drops_and_warnings(out, rank, s);
  }
  if (shown.size() < r.ranks.size())
    out << "\n(" << r.ranks.size() - shown.size() << " more ranks not shown: see --json, or report their files alone)\n";
}

}  // namespace

// Names from traces may hold terminal escapes: the whole text is made safe,
// keeping only the colours.
void write_text(std::ostream& out, const Report& r, const TextOptions& opt) {
  std::ostringstream text;
  write_text_unescaped(text, r, opt);
  out << reader::terminal_safe(text.str(), opt.color);
}

}  // namespace stallscope::analyzer
