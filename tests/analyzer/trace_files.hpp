// Test helper: writes real trace files (format v1, through the test-only
// TraceBuilder of tests/libtrace) for the analyzer's black-box tests.
// One scenario: a trainer process and a forked data worker of rank 0; 6
// steps of 100 ms, each waiting 40 ms for a batch whose sample is read for
// 10 ms then preprocessed for 30 ms; 60 ms of kernels.
#pragma once

#include <string>

#include "libtrace/trace_builder.hpp"

namespace stallscope::testing {

inline constexpr uint64_t kBase = 1'000'000'000;
inline constexpr uint64_t kMs = 1'000'000;

template <typename T>
T ext_of(fmt::Ext type, uint32_t aux = 0) { return make_ext<T>(type, aux); }

// A complete step record (StepExt with its index) of `dur_ns` from `start_ns`.
inline void add_step(Records& t, uint64_t i, uint64_t start_ns, uint64_t dur_ns) {
  auto st = ext_of<fmt::StepExt>(fmt::Ext::kStep, 1);
  st.index = i;
  t.core(fmt::Kind::kStep, 0, start_ns, dur_ns, 0, i).ext(st);
}

inline void write_trainer(const std::string& path, int steps, bool with_end = true) {
  TraceBuilder b;
  b.header.pid = 4242;
  b.metadata(R"({"rank":0,"host":"h1","affinity_count":4,"cgroup_quota_cores":0,"config":{"sample_ms":10}})");
  b.strings({{1, "trainer"}, {2, "gemm"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, fmt::TrackType::kGpuStream)});
  Records t, d;
  for (int i = 0; i < steps; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    add_step(t, uint64_t(i), s, 100 * kMs);
    auto w = ext_of<fmt::WorkExt>(fmt::Ext::kWork, 1);
    w.batch_id = i + 1;
    t.core(fmt::Kind::kDataWait, 0, s, 40 * kMs, 0, i + 1).ext(w);
    auto k = ext_of<fmt::DeviceExt>(fmt::Ext::kDevice, 7);
    d.core(fmt::Kind::kKernel, 0, s + 40 * kMs, 60 * kMs, 2, 0).ext(k);
  }
  b.events({{1, t}, {2, d}});
  if (with_end) b.end();
  b.write(path);
}

inline void write_worker(const std::string& path, int steps) {
  TraceBuilder b;
  b.header.pid = 4243;
  b.header.parent_pid = 4242;
  b.metadata(R"({"rank":0,"host":"h1","affinity_count":4})");
  b.strings({{1, "worker"}, {2, "decode"}, {3, "/data/f"}});
  b.tracks({thread_track(1, 200, 1)});
  Records r;
  for (int i = 0; i < steps; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    auto io = ext_of<fmt::IoExt>(fmt::Ext::kIo, 3);
    io.bytes = 1 << 20;
    io.sample_id = i + 1;
    io.tier = static_cast<uint8_t>(fmt::Tier::kLocal);
    r.core(fmt::Kind::kStorageRead, fmt::kAsync, s, 10 * kMs, 3, 0).ext(io);
    auto w = ext_of<fmt::WorkExt>(fmt::Ext::kWork, 0);
    w.sample_id = i + 1;
    w.count = 1;
    r.core(fmt::Kind::kPreprocess, 0, s + 10 * kMs, 30 * kMs, 2, 0).ext(w);
    auto br = ext_of<fmt::WorkExt>(fmt::Ext::kWork);
    br.batch_id = i + 1;
    br.count = 1;
    const uint64_t ids[] = {uint64_t(i + 1)};
    r.core(fmt::Kind::kBatchReady, fmt::kInstant, s + 40 * kMs, 0, 0, i + 1).ext(br).ids(ids);
  }
  b.events({{1, r}});
  b.end();
  b.write(path);
}

// A DataLoader run as the Python hooks record it (issue #23): the trainer
// (pid 5252) with its loader_config, 6 steps, each waiting 40 ms for batch
// i and handing it off at the end; its worker (pid 5253) fetches batch i in
// [s, s + 39.9): one __getitem__ of 30 ms with a 10 ms network read at its
// start, then a 9 ms collate.
inline void write_dataloader_run(const std::string& trainer, const std::string& worker) {
  constexpr uint64_t kLoader = 0x77;
  {
    TraceBuilder b;
    b.header.pid = 5252;
    b.metadata(R"({"rank":0,"host":"h1","affinity_count":4,"cmdline":["python3","train.py","--lr","0.1"]})");
    b.strings({{1, "trainer"}, {2, "gemm"}, {3, "MapDataset"}, {4, "/home/u/train.py:42"},
               {5, "default_collate"}});
    b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, fmt::TrackType::kGpuStream)});
    Records t, d;
    auto lc = ext_of<fmt::LoaderConfigExt>(fmt::Ext::kLoaderConfig, 5);
    lc.loader_id = kLoader;
    lc.num_workers = 1;
    lc.prefetch_factor = 2;
    lc.batch_size = 4;
    lc.site_name = 4;
    lc.pin_memory = static_cast<uint8_t>(fmt::PinMemory::kInactive);
    lc.mp_context = static_cast<uint8_t>(fmt::MpContext::kFork);
    lc.dataset_kind = static_cast<uint8_t>(fmt::DatasetKind::kMapStyle);
    t.core(fmt::Kind::kLoaderConfig, fmt::kInstant, kBase - kMs, 0, 3, kLoader).ext(lc);
    for (int i = 0; i < 6; ++i) {
      const uint64_t s = kBase + i * 100 * kMs;
      add_step(t, uint64_t(i), s, 100 * kMs);
      auto w = ext_of<fmt::WorkExt>(fmt::Ext::kWork, 3);
      w.batch_id = uint64_t(i);
      t.core(fmt::Kind::kDataWait, 0, s, 40 * kMs, 0, uint64_t(i)).ext(w);
      auto h = ext_of<fmt::BatchHandoffExt>(fmt::Ext::kBatchHandoff);
      h.loader_id = kLoader;
      h.batch_index = uint64_t(i);
      h.requested = s;
      h.worker = 0;
      h.worker_pid = 5253;
      t.core(fmt::Kind::kBatchHandoff, fmt::kAsync, s + 40 * kMs, 0, 0, uint64_t(i)).ext(h);
      auto k = ext_of<fmt::DeviceExt>(fmt::Ext::kDevice, 7);
      d.core(fmt::Kind::kKernel, 0, s + 40 * kMs, 60 * kMs, 2, 0).ext(k);
    }
    b.events({{1, t}, {2, d}});
    b.end();
    b.write(trainer);
  }
  TraceBuilder b;
  b.header.pid = 5253;
  b.header.parent_pid = 5252;
  b.metadata(R"({"rank":0,"host":"h1","affinity_count":4})");
  b.strings({{1, "worker"}, {2, "s3://bucket/shard"}});
  b.tracks({thread_track(1, 300, 1)});
  Records r;
  auto span = [&](uint64_t a, uint64_t dur, uint64_t batch, fmt::SamplePart part, uint32_t count) {
    auto x = ext_of<fmt::SampleExt>(fmt::Ext::kSample);
    x.batch_index = batch;
    x.sample_index = batch * 4;
    x.count = count;
    x.part = static_cast<uint8_t>(part);
    r.core(fmt::Kind::kSample, 0, a, dur, 0, batch).ext(x);
  };
  for (int i = 0; i < 6; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    auto io = ext_of<fmt::IoExt>(fmt::Ext::kIo, 2);
    io.bytes = 1 << 20;
    io.tier = static_cast<uint8_t>(fmt::Tier::kNetwork);
    r.core(fmt::Kind::kStorageRead, fmt::kAsync, s, 10 * kMs, 2, 0).ext(io);
    span(s, 30 * kMs, uint64_t(i), fmt::SamplePart::kGetItem, 1);
    span(s + 30 * kMs, 9 * kMs, uint64_t(i), fmt::SamplePart::kCollate, 4);
    span(s, 39 * kMs + 900'000, uint64_t(i), fmt::SamplePart::kFetch, 4);
  }
  b.events({{1, r}});
  b.end();
  b.write(worker);
}

}  // namespace stallscope::testing
