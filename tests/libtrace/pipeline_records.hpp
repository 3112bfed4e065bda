// One record of each kind of trace format 1.1 (sample, loader_config,
// batch_handoff, channel_handoff, stack_sample), for tests that write them
// with trace_builder.hpp: the reader's and the analyzer's.
#pragma once

#include "libtrace/trace_builder.hpp"

namespace stallscope::testing {

inline format::SampleExt sample_ext() {
  auto x = make_ext<format::SampleExt>(format::Ext::kSample);
  x.loader_id = 0xA11CE;
  x.batch_index = 17;
  x.sample_index = 4242;
  x.generation = 3;
  x.worker = -1;
  x.count = 1;
  x.part = static_cast<uint8_t>(format::SamplePart::kGetItem);
  return x;
}

inline format::LoaderConfigExt loader_ext() {
  auto x = make_ext<format::LoaderConfigExt>(format::Ext::kLoaderConfig, 2);  // collate_fn
  x.loader_id = 0xA11CE;
  x.dataset_len = 50000;
  x.generation = 3;
  x.num_workers = 4;
  x.prefetch_factor = 2;
  x.batch_size = 32;
  x.timeout_ms = 1500;
  x.sampler_name = 3;
  x.batch_sampler_name = 4;
  x.site_name = 5;
  x.pin_memory = static_cast<uint8_t>(format::PinMemory::kInactive);
  x.persistent_workers = 1;
  x.drop_last = 1;
  x.in_order = 0;
  x.mp_context = static_cast<uint8_t>(format::MpContext::kForkserver);
  x.dataset_kind = static_cast<uint8_t>(format::DatasetKind::kMapStyle);
  x.flags = format::kLoaderGetItems | format::kLoaderOverridden;
  return x;
}

inline format::BatchHandoffExt handoff_ext(uint64_t requested) {
  auto x = make_ext<format::BatchHandoffExt>(format::Ext::kBatchHandoff);
  x.loader_id = 0xA11CE;
  x.batch_index = 17;
  x.requested = requested;
  x.generation = 3;
  x.worker = 2;
  x.worker_pid = 31337;
  return x;
}

inline format::ChannelHandoffExt channel_ext(uint64_t requested) {
  auto x = make_ext<format::ChannelHandoffExt>(format::Ext::kChannelHandoff);
  x.channel_id = 0xC4A77E1;
  x.object_id = 555;
  x.bytes = 65540;
  x.requested = requested;
  x.producer_pid = 101;
  x.producer_tid = 102;
  x.consumer_pid = 201;
  x.consumer_tid = 202;
  x.channel_type = static_cast<uint8_t>(format::ChannelType::kMpQueue);
  x.parts = 3;
  return x;
}

inline format::StackSampleExt stack_head() {
  format::StackSampleExt x{};
  x.interval_ns = 20000000;
  x.tid = 100;
  x.cost_ns = 1500;
  x.on_cpu = static_cast<uint8_t>(format::OnCpu::kRunning);
  x.flags = format::kStackLate;
  return x;
}

inline constexpr uint32_t kFrames[] = {6, 7, 8};  // leaf, middle, root

// One of each kind on track 1, ticks = ns, then `more` records; the
// names they use.
inline TraceBuilder pipeline_file(const Records& more = {}) {
  TraceBuilder b;
  b.strings({{1, "MapDataset"}, {2, "default_collate"}, {3, "RandomSampler"},
             {4, "BatchSampler"}, {5, "train.py:42"}, {6, "leaf"}, {7, "middle"}, {8, "root"}});
  b.tracks({thread_track(1, 100)});
  b.events({{1, Records()
                    .core(format::Kind::kSample, 0, 1000, 500, 0, 17)
                    .ext(sample_ext())
                    .core(format::Kind::kLoaderConfig, format::kInstant, 900, 0, 1, 0xA11CE)
                    .ext(loader_ext())
                    .core(format::Kind::kBatchHandoff, format::kAsync, 1000, 800, 0, 17)
                    .ext(handoff_ext(1300))
                    .core(format::Kind::kChannelHandoff, format::kAsync, 2000, 700, 0, 555)
                    .ext(channel_ext(2200))
                    .core(format::Kind::kStackSample, format::kInstant, 3000, 0, 6)
                    .stack(stack_head(), kFrames)},
            {1, more}});
  b.end();
  return b;
}

}  // namespace stallscope::testing
