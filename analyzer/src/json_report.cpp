// The JSON report (docs/report-schema.md): one object per rank with the
// summary, parts, stages, CPU budget, remedies, outliers and the step table.
#include <charconv>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "multirank/cross_render.hpp"
#include "stallscope/analyzer/render.hpp"

namespace stallscope::analyzer {

namespace {

using nlohmann::json;

json numbers(const std::vector<Number>& v) {
  json o = json::object();
  for (const auto& n : v) o[n.name] = {{"value", n.value}, {"unit", n.unit}};
  return o;
}

json parts_json(const RankReport& r) {
  json o = json::object();
  for (size_t p = 0; p < kPartCount; ++p) {
    const PartStat& s = r.parts[p];
    o[std::string(part_key(static_cast<Part>(p)))] = {
        {"total_ms", double(s.total_ns) / 1e6}, {"share", s.share}, {"p50_ms", s.p50_ms}, {"p90_ms", s.p90_ms}};
  }
  return o;
}

json stage_json(const Stage& s) {
  json figures = json::object();
  for (const Figure& f : s.figures)
    figures[std::string(figure_key(f.id))] = {{"value", f.value}, {"unit", figure_unit(f.id)}};
  return {{"name", s.name()}, {"measured", s.measured}, {"utilization", s.utilization},
          {"capacity_per_s", s.capacity}, {"demand_per_s", s.demand}, {"headroom", s.headroom()},
          {"workers", s.workers}, {"busy_per_item_ms", s.busy_per_item_ms},
          {"on_cpu_per_item_ms", s.on_cpu_per_item_ms},
          {"blocked_per_item_ms", s.blocked_per_item_ms}, {"numbers", std::move(figures)}};
}

json remedy_json(const Remedy& m, const std::vector<std::string>& command) {
  json set = json::array();
  for (const Setting& s : m.settings) set.push_back(setting_item(s));
  return {{"id", m.id}, {"title", m.title}, {"evidence", m.evidence}, {"model", m.model},
          {"loader_knob", m.loader_knob}, {"pytorch_knob", m.pytorch_knob}, {"knob_for", m.knob_for}, {"step_ms", m.step_ms},
          {"predicted_step_ms", m.predicted_step_ms}, {"gain_ms", m.gain_ms()}, {"bound", m.bound},
          {"inputs_from", m.inputs_from}, {"inputs", numbers(m.inputs)}, {"try", try_command(m.settings, command)},
          {"set", std::move(set)}};
}

// The guard-rail facts of more workers (-1 unknown).
json guard_rails_json(const DataLoaderReport& l) {
  return {{"shm_free_bytes", l.shm_free_bytes}, {"shm_total_bytes", l.shm_total_bytes},
          {"nofile_soft", l.nofile_soft}, {"open_fds", l.open_fds},
          {"sharing_strategy", l.sharing_strategy}, {"batch_bytes", l.batch_bytes},
          {"batch_tensors", l.batch_tensors}, {"worker_threads", l.worker_threads},
          {"worker_torch_threads", l.worker_torch_threads},
          {"worker_new_threads", l.worker_new_threads}};
}

json loader_json(const DataLoaderReport& l) {
  const LoaderWaitSplit& w = l.split;
  json workers = json::array();
  for (const auto& k : l.workers)
    workers.push_back({{"worker", k.worker}, {"pid", k.pid}, {"batches", k.batches},
                       {"fetch_ms", k.fetch_ms}, {"getitem_ms", k.getitem_ms}, {"collate_ms", k.collate_ms}});
  json slow = json::array();
  for (const auto& x : l.slow_samples)
    slow.push_back({{"index", x.index}, {"times", x.times}, {"ms", x.ms}, {"file", x.file}});
  json epochs = json::array();
  for (const auto& e : l.epochs)
    epochs.push_back({{"generation", e.generation}, {"startup_ms", e.startup_ms},
                      {"workers_started", e.workers_started}, {"first_wait_ms", e.first_wait_ms}});
  return {{"id", l.id}, {"site", l.site},
          {"config", {{"dataset", l.dataset}, {"dataset_kind", l.dataset_kind}, {"dataset_len", l.dataset_len},
                      {"sampler", l.sampler}, {"batch_sampler", l.batch_sampler}, {"collate", l.collate},
                      {"num_workers", l.num_workers}, {"prefetch_factor", l.prefetch_factor},
                      {"batch_size", l.batch_size}, {"pin_memory", l.pin_memory},
                      {"persistent_workers", l.persistent_workers}, {"drop_last", l.drop_last},
                      {"in_order", l.in_order}, {"mp_context", l.mp_context},
                      {"getitems", l.getitems}, {"overridden", l.overridden}}},
          {"fed_optimizer", l.fed_optimizer}, {"generations", l.generations}, {"batches", l.batches},
          {"waits", l.waits}, {"waits_in_steps", l.waits_in_steps}, {"wait_ms", l.wait_ms},
          {"wait_split_ms", {{"storage", w.storage_ms}, {"preprocessing", w.preprocess_ms},
                             {"collate", w.collate_ms}, {"worker_wait", w.worker_wait_ms},
                             {"handoff", w.handoff_ms}, {"head_of_line", w.head_of_line_ms},
                             {"unjoined", w.unjoined_ms}}},
          {"head_of_line_waits", l.head_of_line_waits}, {"head_of_line_ready_ms", l.head_of_line_ready_ms},
          {"fetch_ms", l.fetch_ms}, {"getitem_ms", l.getitem_ms}, {"collate_ms", l.collate_ms},
          {"handoff_ms", l.handoff_ms}, {"trainer_ms_per_batch", l.consume_ms},
          {"unjoined_batches", l.unjoined_batches}, {"sample_spans_off", l.sample_spans_off},
          {"fetch_storage_share", l.fetch_storage_share}, {"fetch_cpu_share", l.fetch_cpu_share},
          {"samples_timed", l.samples_timed}, {"sample_p50_ms", l.sample_p50_ms},
          {"sample_p99_ms", l.sample_p99_ms}, {"slow_sample_count", l.slow_sample_count},
          {"slow_sample_excess_ms", l.slow_sample_excess_ms},
          {"slow_sample_stall_ms", l.slow_sample_stall_ms}, {"slow_samples", std::move(slow)},
          {"workers", std::move(workers)}, {"epochs", std::move(epochs)}};
}

json producer_json(const Producer& p) {
  return {{"pid", p.pid}, {"tid", p.tid}, {"name", p.name}, {"items", p.items},
          {"cpu_ms", p.cpu_ms}, {"storage_ms", p.storage_ms}, {"interval_ms", p.interval_ms}};
}

json feed_json(const FeedReport& f) {
  json j = {{"found", f.found}, {"path", f.path}, {"channel", f.channel},
            {"handoffs", f.handoffs}, {"items", f.items}, {"items_per_step", f.items_per_step},
            {"bytes_per_item", f.bytes_per_item}, {"wait_ms_per_handoff", f.wait_ms_per_handoff},
            {"waited_share", f.waited_share}, {"cpu_ms_per_item", f.cpu_ms_per_item},
            {"storage_ms_per_item", f.storage_ms_per_item}, {"other_ms_per_item", f.other_ms_per_item},
            {"busy_ms_per_item", f.busy_ms_per_item}, {"interval_ms_per_item", f.interval_ms_per_item}};
  j["producers"] = json::array();
  for (const auto& p : f.producers) j["producers"].push_back(producer_json(p));
  j["relays"] = json::array();
  for (const auto& p : f.relays) j["relays"].push_back(producer_json(p));
  return j;
}

json activities_json(const std::vector<GapActivity>& v) {
  json a = json::array();
  for (const auto& x : v) a.push_back({{"name", x.name}, {"kind", x.kind}, {"ms", x.ms}});
  return a;
}

json host_gaps_json(const HostGapReport& g) {
  json classes = json::object(), keys = json::array();
  for (const GapClassStat& c : g.classes) {
    keys.push_back(gap_class_key(c.cls));
    classes[std::string(gap_class_key(c.cls))] = {
        {"ms", c.ms}, {"share", c.share}, {"gaps", c.gaps}, {"top", activities_json(c.top)}};
  }
  json longest = json::array();
  for (const HostGap& x : g.longest)
    longest.push_back({{"step", x.step}, {"start_ms", x.start_ms}, {"ms", x.ms},
                       {"class", gap_class_key(x.cls)}, {"top", x.top}, {"detail", x.detail}});
  return {{"analyzed", g.analyzed}, {"note", g.note}, {"host_ms", g.host_ms},
          {"gaps_per_step", g.gap_count}, {"class_keys", std::move(keys)},
          {"classes", std::move(classes)}, {"top", activities_json(g.top)},
          {"longest", std::move(longest)}, {"optimizer_ms", g.optimizer_ms},
          {"optimizer", g.optimizer}, {"logging_ms", g.logging_ms}, {"logging", g.logging},
          {"sync_call", g.sync_call}, {"sync_made_by", g.sync_made_by},
          {"launches_per_step", g.launches}};
}

constexpr std::pair<uint8_t, std::string_view> kSplitNames[] = {
    {kSplitLineage, "lineage"}, {kSplitInferred, "inferred"}, {kSplitNone, "none"}, {kSplitExact, "exact"}};

json split_json(uint8_t bits) {
  json a = json::array();
  for (const auto& [bit, name] : kSplitNames)
    if (bits & bit) a.push_back(name);
  return a;
}

// The step table as a dump at indent 1 would write it, `depth` spaces deep,
// written directly: a DOM of every step cost more than all the rest of a
// many-rank report (its nodes, their keys, the serializer's walk).
class StepTableWriter {
 public:
  StepTableWriter(std::string& buf, int depth) : buf_(buf), depth_(depth) {}

  // `flush()` after each step: the caller may take the text written so far.
  template <class Flush>
  void write(const SpillVector<StepResult>& steps, Flush&& flush) {
    if (steps.size() == 0) {
      buf_ += "[]";
      return;
    }
    buf_ += '[';
    bool first = true;
    for (const StepResult& s : steps) {
      buf_ += first ? "\n" : ",\n";
      first = false;
      step(s, depth_ + 1);
      flush();
    }
    line(depth_);
    buf_ += ']';
  }

 private:
  void line(int depth) {
    buf_ += '\n';
    buf_.append(static_cast<size_t>(depth), ' ');
  }
  void key(std::string_view k, int depth, bool first) {
    if (!first) buf_ += ',';
    line(depth);
    buf_ += '"';
    buf_ += k;
    buf_ += "\": ";
  }
  template <class T>
  void number(T v) {
    char text[24];
    buf_.append(text, std::to_chars(text, text + sizeof text, v).ptr);
  }
  void boolean(bool v) { buf_ += v ? "true" : "false"; }
  template <class Values>
  void numbers(const Values& v, int depth) {
    if (v.empty()) {
      buf_ += "[]";
      return;
    }
    buf_ += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) buf_ += ',';
      line(depth + 1);
      number(v[i]);
    }
    line(depth);
    buf_ += ']';
  }
  void split(uint8_t bits, int depth) {
    bool first = true;
    for (const auto& [bit, name] : kSplitNames) {
      if ((bits & bit) == 0) continue;
      buf_ += first ? "[" : ",";
      first = false;
      line(depth + 1);
      buf_ += '"';
      buf_ += name;
      buf_ += '"';
    }
    if (first) {
      buf_ += "[]";
      return;
    }
    line(depth);
    buf_ += ']';
  }
  // Keys in the order a JSON object sorts them.
  void step(const StepResult& s, int depth) {
    buf_.append(static_cast<size_t>(depth), ' ');
    buf_ += '{';
    key("closed_by_analyzer", depth + 1, true);
    boolean(s.closed_by_analyzer);
    key("gap_ns", depth + 1, false);
    numbers(s.gap_ns, depth + 1);
    key("index", depth + 1, false);
    number(s.index);
    key("outlier", depth + 1, false);
    boolean(s.outlier);
    key("parts_ns", depth + 1, false);
    numbers(s.parts, depth + 1);
    key("split", depth + 1, false);
    split(s.split, depth + 1);
    key("start_ns", depth + 1, false);
    number(s.start_ns);
    key("wall_ns", depth + 1, false);
    number(s.wall());
    key("warmup", depth + 1, false);
    boolean(s.warmup);
    line(depth);
    buf_ += '}';
  }

  std::string& buf_;
  const int depth_;
};

json cpu_json(const CpuBudget& c) {
  return {{"known", c.known}, {"affinity_cpus", c.affinity_cpus}, {"quota_cores", c.quota_cores},
          {"ranks_on_node", c.ranks_on_node}, {"budget_cores", c.budget_cores},
          {"used_cores", c.used_cores}, {"other_ranks_cores", c.other_ranks_cores},
          {"idle_cpus_during_stalls", c.idle_during_stalls},
          {"idle_cpus_in_steps", c.idle_in_steps},
          {"throttled_periods", c.throttled_periods}, {"throttled_ms", c.throttled_ms},
          {"utilization", c.utilization}, {"capacity_per_s", c.capacity},
          {"demand_per_s", c.demand}, {"headroom", c.headroom()}};
}

json drops_json(const Drops& d) {
  return {{"buffer_dropped", d.buffer_dropped}, {"disk_dropped", d.disk_dropped},
          {"ring_discarded", d.ring_discarded}, {"files_truncated", d.files_truncated},
          {"files_error", d.files_error}, {"late_events", d.late_events}};
}

// The steps chart's buckets and scale (render.hpp step_buckets).
json buckets_json(const RankReport& r, size_t ranks) {
  json b = json::array();
  for (const StepBucket& x : step_buckets(r, step_chart_bars(ranks))) {
    json parts = json::array();
    for (int64_t v : x.median_parts) parts.push_back(v);
    b.push_back({{"first", x.first}, {"last", x.last}, {"steps", x.steps}, {"median_index", x.median_index},
                 {"median_wall_ns", x.median_wall_ns}, {"max_index", x.max_index}, {"max_wall_ns", x.max_wall_ns},
                 {"warmup", x.warmup}, {"outlier", x.outlier}, {"median_parts_ns", std::move(parts)}});
  }
  return {{"scale_ns", r.steps.size() > 0 ? chart_scale_ns(r) : 0}, {"buckets", std::move(b)}};
}

json timelines_json(const RankReport& r) {
  json a = json::array();
  for (const Timeline& t : r.timelines) {
    json lanes = json::array();
    for (const Lane& l : t.lanes) {
      json spans = json::array();
      for (const auto& [x, y] : l.spans) spans.push_back({x, y});
      lanes.push_back({{"name", l.name}, {"kind", l.kind}, {"spans_ns", std::move(spans)}});
    }
    a.push_back({{"why", t.why}, {"index", t.index}, {"wall_ns", t.wall_ns}, {"lanes", std::move(lanes)}});
  }
  return a;
}

json rank_json(const RankReport& r, size_t ranks) {
  json j = {{"rank", r.rank}, {"host", r.host}, {"files", r.files}, {"events", r.events},
            {"step_source", {{"kind", step_source_key(r.source)}, {"detail", r.source_detail}}},
            {"trainer_tid", r.trainer_tid}, {"device_activity", r.device_activity},
            {"compute_basis", r.compute_basis}, {"summary", r.summary}, {"cause", r.cause},
            {"bottleneck", r.bottleneck},
            {"steps", {{"total", r.steps.size()}, {"warmup", r.warmup_steps}, {"steady", r.steady_steps},
                       {"p50_ms", r.step_p50_ms}, {"p90_ms", r.step_p90_ms}}},
            {"parts", parts_json(r)}, {"data_split", split_json(r.split)}, {"cpu", cpu_json(r.cpu)},
            {"drops", drops_json(r.drops)}, {"warnings", r.warnings}};
  if (r.cross.instances > 0 || r.cross.times_last > 0 || r.cross.clock_offset_ns != 0)
    j["cross"] = rank_cross_json(r.cross);
  j["stages"] = json::array();
  for (const auto& s : r.stages) j["stages"].push_back(stage_json(s));
  j["remedies"] = json::array();
  for (const auto& m : r.remedies) j["remedies"].push_back(remedy_json(m, r.command));
  j["dataloaders"] = json::array();
  for (const auto& l : r.dataloaders) {
    j["dataloaders"].push_back(loader_json(l));
    j["dataloaders"].back()["guard_rails"] = guard_rails_json(l);
  }
  j["rejected_remedies"] = json::array();
  for (const auto& x : r.rejected_remedies)
    j["rejected_remedies"].push_back({{"id", x.id}, {"title", x.title}, {"reason", x.reason}});
  j["settings"] = json::array();
  for (const auto& m : r.settings)
    j["settings"].push_back({{"status", m.status}, {"key", m.key}, {"value", m.value},
                             {"site", m.site}, {"detail", m.detail}});
  j["feed"] = feed_json(r.feed);
  j["host_gaps"] = host_gaps_json(r.host_gaps);
  j["phases"] = json::array();
  for (const auto& p : r.phases)
    j["phases"].push_back({{"name", p.name}, {"count", p.count}, {"total_ms", p.total_ms}});
  j["command"] = r.command;
  const Headspace& h = r.headspace;
  j["headspace"] = {{"replayed", h.replayed}, {"batches", h.batches}, {"bytes", h.bytes},
                    {"capped", h.capped}, {"steps_before_replay", h.steps_before},
                    {"ceiling_ms", h.ceiling_ms}, {"ceiling_from", h.ceiling_from},
                    {"loader_cost_ms", h.loader_cost_ms}};
  j["step_buckets"] = buckets_json(r, ranks);
  j["timelines"] = timelines_json(r);
  j["outliers"] = json::array();
  for (const auto& s : r.steps)
    if (s.outlier) j["outliers"].push_back(s.index);
  j["step_table"] = nullptr;  // stands where StepTableWriter writes the table
  return j;
}

// Names from traces (paths, a DataLoader's site, marks) may hold invalid
// UTF-8: replaced with U+FFFD, never an exception halfway through the file.
std::string dump(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

// Appends `text` (a dump at indent 1) as it appears `depth` levels deep.
void append_indented(std::string& buf, std::string_view text, int depth) {
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string_view::npos; at = nl + 1) {
    buf.append(text.substr(at, nl + 1 - at));  // no raw newline inside a JSON string
    buf.append(static_cast<size_t>(depth), ' ');
  }
  buf.append(text.substr(at));
}

// One rank's object, `depth` levels deep, its step table in place of the
// placeholder rank_json leaves. The text goes out in pieces of about
// kFlushBytes, one stream write each.
void write_rank(std::ostream& out, const RankReport& r, size_t ranks, int depth) {
  constexpr size_t kFlushBytes = size_t{1} << 20;
  const std::string doc = dump(rank_json(r, ranks));
  const std::string key = "\n \"step_table\": null";
  const size_t at = doc.find(key);  // keys sit at one space, strings hold no newline
  if (at == std::string::npos) throw std::logic_error("JSON report: no step table placeholder");
  const size_t value_at = at + key.size() - 4;
  std::string buf;
  buf.reserve(2 * kFlushBytes);
  append_indented(buf, std::string_view(doc).substr(0, value_at), depth);
  StepTableWriter table(buf, depth + 1);
  table.write(r.steps, [&] {
    if (buf.size() < kFlushBytes) return;
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.clear();
  });
  append_indented(buf, std::string_view(doc).substr(at + key.size()), depth);
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

}  // namespace

// The document as one DOM would dump it (keys sorted, indent 1), but built
// and written one rank at a time: a report of hundreds of ranks never holds
// more than one rank's tree.
void write_json(std::ostream& out, const Report& r) {
  json part_keys = json::array();
  for (size_t p = 0; p < kPartCount; ++p) part_keys.push_back(part_key(static_cast<Part>(p)));
  json j = {{"schema", "stallscope.report"}, {"schema_version", r.schema_version},
            {"inputs", r.inputs}, {"errors", r.errors}, {"warnings", r.warnings},
            {"part_keys", std::move(part_keys)}, {"schema_minor", kSchemaMinor}};
  if (r.cross.present) j["cross_rank"] = cross_json(r.cross);
  j["ranks"] = nullptr;  // stands where the ranks are written
  const std::string doc = dump(j);
  const std::string key = "\n \"ranks\": null";
  const size_t at = doc.find(key);  // keys sit at one space, strings hold no newline
  if (at == std::string::npos) throw std::logic_error("JSON report: no ranks placeholder");
  out << std::string_view(doc).substr(0, at + key.size() - 4);
  if (r.ranks.empty()) {
    out << "[]";
  } else {
    out << "[\n  ";
    for (size_t i = 0; i < r.ranks.size(); ++i) {
      if (i > 0) out << ",\n  ";
      write_rank(out, r.ranks[i], r.ranks.size(), 2);
    }
    out << "\n ]";
  }
  out << std::string_view(doc).substr(at + key.size()) << "\n";
}

}  // namespace stallscope::analyzer
