// Writes the fuzzer's seed corpus: small valid traces made by
// trace_builder.hpp, one per shape (every extension, TSC clock, cut file,
// unknown kinds, the format 1.1 kinds). Usage: fuzz_seeds DIR
#include <cstdio>
#include <string>

#include "libtrace/trace_builder.hpp"

using namespace stallscope::testing;
using stallscope::format::Ext;
using stallscope::format::Kind;
namespace format = stallscope::format;

namespace {

Records every_extension() {
  const uint64_t ids[] = {11, 12, 13};
  Records r;
  r.core(Kind::kStep, format::kBegin, 100).ext(make_ext<format::StepExt>(Ext::kStep));
  r.core(Kind::kStorageRead, format::kAsync, 110, 40, 1).ext(make_ext<format::IoExt>(Ext::kIo, 2));
  r.core(Kind::kPreprocess, 0, 120, 10).ext(make_ext<format::WorkExt>(Ext::kWork));
  r.core(Kind::kBatchReady, format::kInstant, 130).ids(ids).ids(ids);
  r.core(Kind::kApiCall, 0, 140, 5, 0, 9).ext(make_ext<format::ApiExt>(Ext::kApi));
  r.core(Kind::kH2D, 0, 150, 5, 0, 9).ext(make_ext<format::CopyExt>(Ext::kCopy));
  r.core(Kind::kKernel, 0, 160, 5).ext(make_ext<format::DeviceExt>(Ext::kDevice));
  r.core(Kind::kCollective, 0, 170, 5).ext(make_ext<format::CollectiveExt>(Ext::kCollective));
  r.core(Kind::kRange, format::kBegin, 175).ext(make_ext<format::RangeExt>(Ext::kRange));
  r.core(Kind::kRange, format::kEnd, 178);
  r.core(Kind::kCounter, rec_flags(format::kInstant, format::kValueDouble), 180,
         0x4004000000000000ull);
  r.core(Kind::kGap, format::kInstant, 185, 3);
  r.core(Kind::kStep, format::kEnd, 190).ext(make_ext<format::StepExt>(Ext::kStep));
  return r;
}

// The kinds of format 1.1, each with its extension; a hand-off with a
// requested time (converted), stack samples with an odd, an even and no
// frame count, one on a Begin record (the exporter keeps its frames).
Records pipeline_kinds() {
  const uint32_t frames[] = {3, 4, 5};
  auto sample = make_ext<format::SampleExt>(Ext::kSample);
  sample.count = 1;
  auto handoff = make_ext<format::BatchHandoffExt>(Ext::kBatchHandoff);
  handoff.requested = 205;
  auto channel = make_ext<format::ChannelHandoffExt>(Ext::kChannelHandoff);
  channel.requested = 230;
  format::StackSampleExt stack{};
  Records r;
  r.core(Kind::kSample, 0, 200, 10, 0, 1).ext(sample);
  r.core(Kind::kLoaderConfig, format::kInstant, 190, 0, 1, 7)
      .ext(make_ext<format::LoaderConfigExt>(Ext::kLoaderConfig, 2));
  r.core(Kind::kBatchHandoff, format::kAsync, 200, 20, 0, 1).ext(handoff);
  r.core(Kind::kChannelHandoff, format::kAsync, 220, 15).ext(channel);
  r.core(Kind::kStackSample, format::kInstant, 240, 0, 3).stack(stack, frames);
  r.core(Kind::kStackSample, format::kInstant, 250, 0, 3).stack(stack, std::span(frames, 2));
  r.core(Kind::kStackSample, format::kInstant, 260).stack(stack, {});
  r.core(Kind::kRange, format::kBegin, 270).stack(stack, frames);
  r.core(Kind::kRange, format::kEnd, 280);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  TraceBuilder full;
  full.strings({{1, "read"}, {2, "/data/shard0"}}).tracks({thread_track(1, 100, 1)});
  full.metadata(R"({"host":"node1","rank":0,"config":{"max_mb":64}})")
      .attachment("topology", "<t/>");
  full.events({{1, every_extension()}, {2, Records().core(Kind::kMark, format::kInstant, 1)}});
  full.end({0, 0, 1000, 1, 2048}, {{1, 0, 13, 3, 1}});
  full.write(dir + "/builder_full.sst");

  TraceBuilder tsc;
  tsc.header.flags = 0;
  tsc.header.tsc_hz = 2000000000;
  tsc.ticks_per_ns = 2.0;
  tsc.events({{1, Records().core(Kind::kKernel, 0, 3000000, 500)}});
  tsc.events({{1, Records().core(Kind::kKernel, format::kTimesNs, 4000000, 500)}});
  tsc.end();
  tsc.write(dir + "/builder_tsc.sst");

  TraceBuilder pipeline;
  pipeline.strings(
      {{1, "MapDataset"}, {2, "default_collate"}, {3, "leaf"}, {4, "mid"}, {5, "root"}});
  pipeline.tracks({thread_track(1, 100)});
  pipeline.events({{1, pipeline_kinds()}});
  pipeline.end();
  pipeline.write(dir + "/builder_pipeline.sst");

  TraceBuilder future;
  future.header.version_minor = 9;
  future.chunk_raw(77, {1, 2, 3, 4});
  future.events({{1, Records().core_raw(0x70, 0, 5).core(Kind::kMark, format::kInstant, 6)}});
  future.write(dir + "/builder_future_cut.sst");
  return 0;
}
