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

}  // namespace stallscope::testing
