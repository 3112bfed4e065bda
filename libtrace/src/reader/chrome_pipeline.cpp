// The Chrome trace "args" and names of trace format 1.1's kinds: samples,
// loader configurations, batch and channel hand-offs, stack samples.
#include <array>

#include "reader/chrome_writer.hpp"

namespace stallscope::reader::detail {

namespace {

template <size_t N>
std::string enum_name(const std::array<const char*, N>& names, unsigned v) {
  return v < N ? std::string(names[v]) : std::to_string(v);
}

constexpr std::array<const char*, 5> kSamplePart = {"getitem", "next", "getitems", "fetch",
                                                    "collate"};
constexpr std::array<const char*, 4> kMpContext = {"unknown", "fork", "spawn", "forkserver"};
constexpr std::array<const char*, 3> kDatasetKind = {"unknown", "map", "iterable"};
constexpr std::array<const char*, 3> kPinMemory = {"off", "on", "inactive"};
constexpr std::array<const char*, 8> kChannelType = {"unknown", "pipe",    "mp_queue", "socket",
                                                     "user",    "eventfd", "condvar",  "semaphore"};
constexpr std::array<const char*, 3> kOnCpu = {"unknown", "running", "blocked"};
constexpr size_t kMaxFramesShown = 64;

}  // namespace

std::string ChromeWriter::pipeline_name(const Event& e) const {
  using format::Ext;
  if (e.kind_enum() == format::Kind::kSample && e.has(Ext::kSample)) {
    const auto& x = e.sample;
    switch (static_cast<format::SamplePart>(x.part)) {
      case format::SamplePart::kGetItem:
        return "sample " + std::to_string(x.sample_index);
      case format::SamplePart::kFetch:
        return "fetch batch " + std::to_string(x.batch_index);
      default:
        return enum_name(kSamplePart, x.part);
    }
  }
  if (e.kind_enum() == format::Kind::kBatchHandoff && e.has(Ext::kBatchHandoff))
    return "batch " + std::to_string(e.batch_handoff.batch_index);
  return {};
}

void ChromeWriter::bool_arg(std::string_view k, bool v) { akey(k).raw(v ? "true" : "false"); }

void ChromeWriter::pipeline_args(const TraceReader& r, const Event& e) {
  using format::Ext;
  if (e.has(Ext::kSample)) sample_args(e.sample);
  if (e.has(Ext::kLoaderConfig)) loader_config_args(r, e.loader_config);
  if (e.has(Ext::kBatchHandoff)) {
    const auto& x = e.batch_handoff;
    akey("loader_id").num(x.loader_id);
    akey("generation").num(uint64_t{x.generation});
    akey("batch_index").num(x.batch_index);
    akey("worker").num(int64_t{x.worker});
    akey("worker_pid").num(uint64_t{x.worker_pid});
  }
  if (e.has(Ext::kChannelHandoff)) channel_args(e.channel_handoff);
  // On the trace's timeline, as "ts" (µs from the same base).
  if (e.requested_ns != 0) akey("requested_ts").micros(e.requested_ns - base_);
  if (e.has(Ext::kStackSample)) stack_args(r, e);
}

void ChromeWriter::sample_args(const format::SampleExt& x) {
  akey("loader_id").num(x.loader_id);
  akey("generation").num(uint64_t{x.generation});
  akey("batch_index").num(x.batch_index);
  akey("sample_index").num(x.sample_index);
  akey("worker").num(int64_t{x.worker});
  akey("count").num(uint64_t{x.count});
  akey("part").str(enum_name(kSamplePart, x.part));
}

void ChromeWriter::loader_config_args(const TraceReader& r, const format::LoaderConfigExt& x) {
  akey("loader_id").num(x.loader_id);
  akey("generation").num(uint64_t{x.generation});
  akey("num_workers").num(uint64_t{x.num_workers});
  akey("prefetch_factor").num(uint64_t{x.prefetch_factor});
  akey("batch_size").num(uint64_t{x.batch_size});
  akey("pin_memory").str(enum_name(kPinMemory, x.pin_memory));
  bool_arg("persistent_workers", x.persistent_workers != 0);
  bool_arg("drop_last", x.drop_last != 0);
  bool_arg("in_order", x.in_order != 0);
  akey("mp_context").str(enum_name(kMpContext, x.mp_context));
  akey("timeout_ms").num(uint64_t{x.timeout_ms});
  akey("dataset_len").num(x.dataset_len);
  akey("dataset_kind").str(enum_name(kDatasetKind, x.dataset_kind));
  akey("collate_fn").str(r.string(x.h.aux));
  akey("sampler").str(r.string(x.sampler_name));
  akey("batch_sampler").str(r.string(x.batch_sampler_name));
  akey("site").str(r.string(x.site_name));
  if (x.flags & format::kLoaderGetItems) bool_arg("getitems", true);
  if (x.flags & format::kLoaderOverridden) bool_arg("overridden", true);
}

void ChromeWriter::channel_args(const format::ChannelHandoffExt& x) {
  akey("channel_id").num(x.channel_id);
  akey("channel_type").str(enum_name(kChannelType, x.channel_type));
  akey("producer_pid").num(uint64_t{x.producer_pid});
  akey("producer_tid").num(uint64_t{x.producer_tid});
  akey("consumer_pid").num(uint64_t{x.consumer_pid});
  akey("consumer_tid").num(uint64_t{x.consumer_tid});
  akey("object_id").num(x.object_id);
  akey("bytes").num(x.bytes);
  akey("parts").num(uint64_t{x.parts});
}

void ChromeWriter::stack_args(const TraceReader& r, const Event& e) {
  const auto& x = e.stack_sample;
  akey("tid").num(uint64_t{x.tid});
  akey("interval_ns").num(x.interval_ns);
  akey("cost_ns").num(uint64_t{x.cost_ns});
  akey("on_cpu").str(enum_name(kOnCpu, x.on_cpu));
  if (x.flags & format::kStackLate) bool_arg("late", true);
  if (x.flags & format::kStackTruncated) bool_arg("truncated", true);
  if (x.flags & format::kStackNative) bool_arg("native", true);
  akey("frame_count").num(uint64_t{e.frames.size()});
  akey("frames").raw("[");  // innermost first
  for (size_t i = 0; i < e.frames.size() && i < kMaxFramesShown; ++i) {
    if (i > 0) json_.raw(",");
    json_.str(r.string(e.frames[i]));
  }
  json_.raw("]");
}

}  // namespace stallscope::reader::detail
