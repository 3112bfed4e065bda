// Test helper: hand-built ranks (rank_builder.hpp) for the remedy rules'
// tests: each builder's parameter moves a run across one rule's threshold
// (docs/remedies.md). Steps 1..8 of 100 ms from t = 100 ms; the first is
// warm-up, so a part's mean over the steady steps is its per-step length.
#pragma once

#include <string>
#include <vector>

#include "analyzer/rank_builder.hpp"

namespace stallscope::testing {

inline constexpr int kSteps = 8;
inline constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;
inline double start_of(int i) { return 100.0 * i; }

// The rank may use 4 CPUs, uses one core, and `idle` CPUs of them sit idle
// the whole run (the sampler's cpu.idle and cpu.process_ns).
inline void cpus(RankBuilder& b, double idle) {
  b.t.procs[0].affinity_cpus = 4;
  for (int t = 0; t <= 100 * (kSteps + 1); t += 10)
    b.counter("cpu.idle", t, idle).counter("cpu.process_ns", t, t * 1e6);
}

inline constexpr double kReadS = 0.065;  // each read of storage_bound is in flight 65 ms

// The trainer waits 60 ms for a batch whose one read (sample i) is in
// flight from 5 ms before the step; then 35 ms of compute. The reads of
// the first `network_steps` steps come from network storage.
inline RankBuilder storage_bound(const RankBuilder::ReadOpts& o, int network_steps = 0) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    RankBuilder::ReadOpts ro = o;
    if (i <= network_steps) ro.tier = format::Tier::kNetwork;
    b.step(i, s, s + 100).wait(s, s + 60, i).kernel(s + 60, s + 95);
    b.read(w, s - 5, s + 60, uint64_t(i), ro).ready(w, s + 60, i, {uint64_t(i)});
  }
  return b;
}

// One worker reads a step's 16 samples of 64 KiB one after the other,
// 3.75 ms each, while the trainer waits 60 ms; files(i, j) names the file
// of sample j of step i.
template <typename Files>
RankBuilder small_reads(Files files) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    std::vector<uint64_t> samples;
    for (int j = 0; j < 16; ++j) {
      const uint64_t sample = uint64_t(16 * i + j);
      b.read(w, s + 3.75 * j, s + 3.75 * (j + 1), sample,
             {.bytes = 64 * kKiB, .file = files(i, j)});
      samples.push_back(sample);
    }
    b.ready(w, s + 60, i, samples).step(i, s, s + 100).wait(s, s + 60, i).kernel(s + 60, s + 95);
  }
  return b;
}

// The trainer waits 12 ms for its batch, then computes 83 ms. One worker
// reads the batch's sample (4 ms), then preprocesses it for `pre_ms`,
// finishing as the wait ends: with 8 ms both stages keep up (a burst at the
// step's start), with 96 ms preprocessing is busy all step long.
inline RankBuilder late_batch(double pre_ms) {
  RankBuilder b;
  cpus(b, 3);
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i), pre_at = s + 12 - pre_ms;
    b.step(i, s, s + 100).wait(s, s + 12, i).kernel(s + 12, s + 95);
    b.read(w, pre_at - 4, pre_at, uint64_t(i)).pre(w, pre_at, s + 12, uint64_t(i));
    b.ready(w, s + 12, i, {uint64_t(i)});
  }
  return b;
}

// The trainer waits 50 ms for a batch that one worker preprocesses in
// 90 ms; then 40 ms of compute. `idle` CPUs of the 4 sit idle.
inline RankBuilder preprocess_bound(double idle) {
  RankBuilder b;
  cpus(b, idle);
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).wait(s, s + 50, i).kernel(s + 50, s + 90);
    b.pre(w, s - 40, s + 50, uint64_t(i)).ready(w, s + 50, i, {uint64_t(i)});
  }
  return b;
}

// Each step opens with an H2D copy of `bytes` in `copy_ms`, then compute.
inline RankBuilder copies(double copy_ms, uint64_t bytes, bool pinned) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100)
        .copy(Kind::kH2D, s, s + copy_ms, bytes, pinned)
        .kernel(s + copy_ms, s + 100);
  }
  return b;
}

// An H200 in a PCIe Gen5 x16 slot (63 GB/s per direction), local to CPUs
// 48-95 (NUMA node 1 of 2), with `nvlinks` active NVLink links.
inline analyzer::GpuLink h200(int nvlinks = 0) {
  analyzer::GpuLink g;
  g.index = 0;
  g.name = "NVIDIA H200";
  g.bus_id = "0000:9a:00.0";
  g.pcie_gen = 5;
  g.pcie_width = 16;
  g.gbps = 63.0;
  g.from_max = true;
  g.numa = 1;
  g.cpus = "48-95";
  g.nvlinks_active = nvlinks;
  return g;
}

// The trainer's processes may run on `affinity`; each step copies 1.5 GB
// pinned in 30 ms (50 GB/s), waits 10 ms for data no producer explains,
// then computes 60 ms. The host has two NUMA nodes and the H200 above.
inline RankBuilder numa_run(const std::string& affinity) {
  RankBuilder b;
  b.t.procs[0].affinity = affinity;
  b.t.probes.gpus = {h200()};
  b.t.probes.host_numa_nodes = 2;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).copy(Kind::kH2D, s, s + 30, 1'500'000'000).wait(s + 30, s + 40);
    b.kernel(s + 40, s + 100);
  }
  return b;
}

// Each step: an NCCL all-reduce of `bytes` among 2 ranks of this host
// (call, launch, 20 ms kernel), then 78 ms of compute; the GPU has 18
// NVLink links (450 GB/s at 25 GB/s each).
inline RankBuilder all_reduces(uint64_t bytes) {
  RankBuilder b;
  b.t.probes.gpus = {h200(18)};
  b.t.probes.ranks_on_node = 2;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    const uint64_t corr = 1000 + uint64_t(i);
    b.step(i, s, s + 100).nccl_call(s + 1, s + 2, 0xC0FFEE, uint64_t(i), bytes, 2);
    b.api(s + 1.5, s + 1.6, corr).collective(s + 2, s + 22, corr).kernel(s + 22, s + 100);
  }
  return b;
}

// Each step: a collective kernel (no call recorded) exposed `comm_ms`, then compute.
inline RankBuilder exposed_comm(double comm_ms) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).collective(s, s + comm_ms).kernel(s + comm_ms, s + 100);
  }
  return b;
}

// A 10 ms kernel, a 5 ms launch with the device idle, 45 ms more of kernels
// with a blocking sync from 40 ms returning with them at `sync_ms`, the
// device idle until 90 ms, a last 10 ms kernel.
inline RankBuilder synced(double sync_ms) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).kernel(s, s + 10).api(s + 10, s + 15).kernel(s + 15, s + sync_ms);
    b.sync(s + 40, s + sync_ms).kernel(s + 90, s + 100);
  }
  return b;
}

// 70 ms of compute, then ten launches of `launch_ms`, each followed by its
// kernel (3 ms per pair).
inline RankBuilder launches(double launch_ms) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).kernel(s, s + 70);
    for (int k = 0; k < 10; ++k) {
      const double at = s + 70 + 3 * k;
      b.api(at, at + launch_ms).kernel(at + launch_ms, at + 3);
    }
  }
  return b;
}

// The trainer waits `wait_ms` for data at each step's start, then computes.
inline RankBuilder unsplit_stall(double wait_ms) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).wait(s, s + wait_ms, i).kernel(s + wait_ms, s + 100);
  }
  return b;
}

}  // namespace stallscope::testing
