// The JSON of each Chrome trace event: slices, async pairs, instants,
// counters, process and thread names, and the attributes in "args".
#include <algorithm>
#include <array>
#include <cstdio>

#include "reader/chrome_writer.hpp"

namespace stallscope::reader::detail {

namespace {

// Name of an enum value from a file, or its number when out of range.
template <size_t N>
std::string enum_name(const std::array<const char*, N>& names, unsigned v) {
  return v < N ? std::string(names[v]) : std::to_string(v);
}

constexpr std::array<const char*, 4> kTier = {"unknown", "local", "network", "memory"};
constexpr std::array<const char*, 4> kCache = {"unknown", "hit", "miss", "partial"};
constexpr std::array<const char*, 7> kCacheMethod = {"none", "nowait", "cachestat", "latency",
                                                     "tier", "direct", "fault"};
constexpr std::array<const char*, 5> kMem = {"unknown", "pageable", "pinned", "device", "managed"};
constexpr std::array<const char*, 10> kCollOp = {
    "unknown", "all_reduce", "all_gather", "reduce_scatter", "broadcast",
    "reduce",  "all_to_all", "send",       "recv",           "barrier"};
constexpr std::array<const char*, 5> kApiDomain = {"unknown", "cuda_runtime", "cuda_driver", "nccl",
                                                   "mpi"};
constexpr std::array<const char*, 5> kStepSource = {"unknown", "api", "range", "hook", "inferred"};
constexpr std::array<const char*, 6> kWaitSource = {"unknown", "api",  "range",
                                                    "hook",    "pipe", "inferred"};
constexpr std::array<const char*, 5> kSyncKind = {"unknown", "device", "stream", "event",
                                                  "context"};
constexpr size_t kMaxIdsShown = 64;

}  // namespace

void ChromeWriter::separator() {
  json_.raw(first_ ? "\n" : ",\n");
  first_ = false;
  ++res_.events;
}

void ChromeWriter::head(char ph, std::string_view cat, std::string_view name, uint32_t tid,
                        int64_t ts) {
  separator();
  const char phase[2] = {ph, 0};
  json_.raw("{\"ph\":\"").raw(phase).raw("\",\"cat\":").str(cat).raw(",\"name\":").str(name);
  json_.key("pid").num(uint64_t{pid_}).key("tid").num(uint64_t{tid}).key("ts").micros(ts - base_);
}

std::string ChromeWriter::event_name(const TraceReader& r, const Event& e) const {
  std::string_view name = r.string(e.name_id);
  if (!name.empty()) return std::string(name);
  if (e.kind_enum() == format::Kind::kStep && e.has(format::Ext::kStep))
    return "step " + std::to_string(e.step.index);
  if (e.kind_enum() == format::Kind::kGap) return "dropped " + std::to_string(e.value) + " events";
  if (std::string pipeline = pipeline_name(e); !pipeline.empty()) return pipeline;
  return std::string(kind_name(e.kind));
}

void ChromeWriter::slice(const TraceReader& r, const Event& e, std::span<const uint64_t> ids,
                         int64_t start, int64_t end) {
  if (end < from_ || start > to_) return;
  const bool sync = !e.async() && track(e.track_id).lane.place(start, end);
  const std::string_view cat = kind_name(e.kind);
  const std::string name = event_name(r, e);
  if (sync) {
    head('X', cat, name, e.track_id, start);
    json_.key("dur").micros(end - start);
    args(r, e, ids);
    json_.raw("}");
    return;
  }
  char id[24];
  std::snprintf(id, sizeof id, "0x%llx", static_cast<unsigned long long>(next_async_id_++));
  head('b', cat, name, e.track_id, start);
  json_.key("id").str(id);
  args(r, e, ids);
  json_.raw("}");
  head('e', cat, name, e.track_id, end);
  json_.key("id").str(id).raw("}");
}

void ChromeWriter::instant(const TraceReader& r, const Event& e) {
  if (e.ts_ns < from_ || e.ts_ns > to_) return;
  head('i', kind_name(e.kind), event_name(r, e), e.track_id, e.ts_ns);
  json_.raw(",\"s\":\"t\"");
  args(r, e, e.ids);
  json_.raw("}");
}

void ChromeWriter::counter(const TraceReader& r, const Event& e) {
  if (e.ts_ns < from_ || e.ts_ns > to_) return;
  std::string name(r.string(e.name_id));
  if (name.empty()) name = "counter";
  // Perfetto keys counter tracks by process and name: keep subjects apart.
  if (e.corr != 0) name += " [" + std::to_string(e.corr) + "]";
  head('C', "counter", name, e.track_id, e.ts_ns);
  json_.raw(",\"args\":{\"value\":").num(e.number()).raw("}}");
}

void ChromeWriter::args(const TraceReader& r, const Event& e, std::span<const uint64_t> ids) {
  using format::Ext;
  args_open_ = false;
  if (e.corr != 0) akey("corr").num(e.corr);
  if ((e.flags & format::kEmulated) != 0) akey("emulated").raw("true");
  if (e.kind_enum() == format::Kind::kGap) akey("dropped").num(e.value);
  if (e.has(Ext::kIo)) io_args(r, e.io);
  if (e.has(Ext::kWork)) work_args(e);
  if (e.has(Ext::kIdList)) id_args(ids);
  if (e.has(Ext::kCopy)) copy_args(e.copy);
  if (e.has(Ext::kDevice)) device_args(e);
  if (e.has(Ext::kCollective)) collective_args(e.collective);
  if (e.has(Ext::kApi)) {
    akey("domain").str(enum_name(kApiDomain, e.api.domain));
    akey("cbid").num(uint64_t{e.api.h.aux});
    akey("result").num(int64_t{e.api.result});
  }
  if (e.has(Ext::kStep)) {
    akey("step").num(e.step.index);
    akey("step_source").str(enum_name(kStepSource, e.step.h.aux));
  }
  if (e.has(Ext::kRange)) {
    akey("domain").str(r.string(e.range.h.aux));
    akey("color").num(uint64_t{e.range.color});
    akey("category").num(uint64_t{e.range.category});
  }
  pipeline_args(r, e);
  if (args_open_) json_.raw("}");
}

void ChromeWriter::io_args(const TraceReader& r, const format::IoExt& x) {
  akey("file").str(r.string(x.h.aux));
  akey("bytes").num(x.bytes);
  akey("file_offset").num(x.offset);
  akey("hit_bytes").num(x.hit_bytes);
  akey("queued_ns").num(x.queued_ns);
  if (x.sample_id != 0) akey("sample_id").num(x.sample_id);
  akey("tier").str(enum_name(kTier, x.tier));
  akey("cache").str(enum_name(kCache, x.cache));
  akey("cache_method").str(enum_name(kCacheMethod, x.cache_method));
  akey("queue_depth").num(uint64_t{x.queue_depth});
}

void ChromeWriter::work_args(const Event& e) {
  const auto& x = e.work;
  akey("sample_id").num(x.sample_id);
  akey("batch_id").num(x.batch_id);
  akey("count").num(uint64_t{x.count});
  if (e.kind_enum() == format::Kind::kDataWait) {
    akey("source").str(enum_name(kWaitSource, x.h.aux));
  } else {
    akey("worker").num(uint64_t{x.h.aux});
  }
}

void ChromeWriter::id_args(std::span<const uint64_t> ids) {
  akey("id_count").num(uint64_t{ids.size()});
  akey("ids").raw("[");
  for (size_t i = 0; i < ids.size() && i < kMaxIdsShown; ++i) {
    if (i > 0) json_.raw(",");
    json_.num(ids[i]);
  }
  json_.raw("]");
}

void ChromeWriter::copy_args(const format::CopyExt& x) {
  akey("bytes").num(x.bytes);
  akey("src").str(enum_name(kMem, x.src));
  akey("dst").str(enum_name(kMem, x.dst));
  akey("device").num(uint64_t{x.device});
  akey("stream").num(uint64_t{x.h.aux});
}

void ChromeWriter::device_args(const Event& e) {
  akey("device").num(uint64_t{e.device.device});
  akey("stream").num(uint64_t{e.device.h.aux});
  if (e.kind_enum() == format::Kind::kSync)
    akey("sync_kind").str(enum_name(kSyncKind, e.device.sync_kind));
}

void ChromeWriter::collective_args(const format::CollectiveExt& x) {
  akey("op").str(enum_name(kCollOp, x.h.aux & 0xFF));
  akey("dtype").num(uint64_t{(x.h.aux >> 8) & 0xFF});
  akey("bytes").num(x.bytes);
  akey("comm_id").num(x.comm_id);
  akey("seq").num(x.seq);
  akey("rank").num(uint64_t{x.rank});
  akey("nranks").num(uint64_t{x.nranks});
  akey("peer").num(int64_t{x.peer});
  if (x.flags & format::kCollEnqueued) akey("enqueued").raw("true");
  if (x.flags & format::kCollJoinOnly) akey("join_only").raw("true");
}

JsonOut& ChromeWriter::akey(std::string_view k) {
  if (args_open_) return json_.key(k);
  args_open_ = true;
  return json_.raw(",\"args\":{\"").raw(k).raw("\":");
}

// ------------------------------------------------------ names and framing --

void ChromeWriter::metadata(std::string_view what, uint32_t tid, std::string_view key,
                            std::string_view text, int64_t number) {
  separator();
  json_.raw("{\"ph\":\"M\",\"name\":").str(what).key("pid").num(uint64_t{pid_});
  json_.key("tid").num(uint64_t{tid}).raw(",\"args\":{\"").raw(key).raw("\":");
  if (key == "name") {
    json_.str(text);
  } else {
    json_.num(number);
  }
  json_.raw("}}");
}

void ChromeWriter::write_prologue(const std::vector<TraceReader*>& files) {
  json_.raw("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"stallscope\"");
  json_.key("base_mono_ns").num(base_).key("files").raw("[");
  for (size_t i = 0; i < files.size(); ++i) json_.raw(i == 0 ? "" : ",").str(files[i]->path());
  json_.raw("]},\"traceEvents\":[");
}

void ChromeWriter::write_epilogue() { json_.raw("\n]}\n"); }

void ChromeWriter::begin_process(const TraceReader& r, uint32_t chrome_pid) {
  pid_ = chrome_pid;
  const uint32_t pid = r.header().pid;
  std::string name = r.host().empty() ? "" : r.host() + " ";
  if (r.rank() >= 0) name += "rank " + std::to_string(r.rank()) + " ";
  name += "(pid " + std::to_string(pid) + ")";
  metadata("process_name", 0, "name", name, 0);
  if (r.rank() >= 0) metadata("process_sort_index", 0, "sort_index", "", r.rank());
}

namespace {

// "loader (tid 101)", "GPU 0 stream 7", "emulated device 0 …", "process".
std::string track_title(const TrackInfo& t, std::string_view name) {
  std::string title;
  switch (t.type) {
    case format::TrackType::kThread:
      title = name.empty() ? std::string("thread") : std::string(name);
      title += " (tid ";
      title += std::to_string(t.tid);
      title += ")";
      return title;
    case format::TrackType::kGpuStream:
      title = "GPU ";
      title += std::to_string(t.device);
      title += " stream ";
      title += std::to_string(t.tid);
      break;
    case format::TrackType::kEmulated:
      title = "emulated device ";
      title += std::to_string(t.device);
      break;
    default:
      return name.empty() ? std::string("process") : std::string(name);
  }
  if (!name.empty()) {
    title += " ";
    title += name;
  }
  return title;
}

}  // namespace

void ChromeWriter::name_tracks(const TraceReader& r) {
  for (const auto& t : r.tracks()) {
    TrackState& s = track(t.track_id);
    if (s.named) continue;
    s.named = true;
    metadata("thread_name", t.track_id, "name", track_title(t, r.string(t.name_id)), 0);
    const int64_t order = int64_t{static_cast<uint8_t>(t.type)} * 1000000 + t.track_id;
    metadata("thread_sort_index", t.track_id, "sort_index", "", order);
  }
}

}  // namespace stallscope::reader::detail

// ---- Caller-made tracks (ChromeExportOptions::extra_events).

namespace stallscope::reader::detail {

void ChromeWriter::extra_process(uint32_t chrome_pid, std::string_view name, int64_t sort_index) {
  pid_ = chrome_pid;
  metadata("process_name", 0, "name", name, 0);
  metadata("process_sort_index", 0, "sort_index", "", sort_index);
}

void ChromeWriter::extra_thread(uint32_t chrome_pid, uint32_t tid, std::string_view name) {
  pid_ = chrome_pid;
  metadata("thread_name", tid, "name", name, 0);
}

bool ChromeWriter::extra_slice(uint32_t chrome_pid, uint32_t tid, std::string_view cat,
                               std::string_view name, int64_t start, int64_t dur,
                               std::span<const ChromeEventSink::Arg> args) {
  if (dur < 0 || start > to_ || start + dur < from_) return false;
  pid_ = chrome_pid;
  head('X', cat, name, tid, start);
  json_.key("dur").micros(dur);
  if (!args.empty()) {
    json_.raw(",\"args\":{");
    for (size_t i = 0; i < args.size(); ++i)
      json_.raw(i == 0 ? "" : ",").str(args[i].first).raw(":").num(args[i].second);
    json_.raw("}");
  }
  json_.raw("}");
  return true;
}

}  // namespace stallscope::reader::detail

namespace stallscope::reader {

uint32_t ChromeEventSink::add_process(std::string_view name, int64_t sort_index) {
  uint32_t pid = 1;
  for (uint32_t p : used_pids_) pid = std::max(pid, p + 1);
  used_pids_.push_back(pid);
  w_.extra_process(pid, name, sort_index);
  return pid;
}

void ChromeEventSink::thread(uint32_t pid, uint32_t tid, std::string_view name) {
  w_.extra_thread(pid, tid, name);
}

bool ChromeEventSink::slice(uint32_t pid, uint32_t tid, std::string_view cat, std::string_view name,
                            int64_t start_ns, int64_t dur_ns, std::span<const Arg> args) {
  return w_.extra_slice(pid, tid, cat, name, start_ns, dur_ns, args);
}

int64_t ChromeEventSink::base_mono_ns() const noexcept { return w_.base_ns(); }

}  // namespace stallscope::reader
