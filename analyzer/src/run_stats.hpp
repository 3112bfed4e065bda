// Run-level totals the capacity model needs, accumulated while streaming
// (constant memory apart from the small sets of workers and files).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

#include "channels.hpp"
#include "decimated.hpp"

namespace stallscope::analyzer {

struct TierStats {
  uint64_t reads = 0, bytes = 0;
  // Over the reads whose page-cache state is known (the preload shim
  // classifies one small read in N): their bytes, and of those the hits
  // and misses (a partial hit's bytes past the hit are misses).
  uint64_t classified_bytes = 0, miss_bytes = 0, hit_bytes = 0;
  uint64_t storage_reads = 0;  // classified reads that went to storage: misses and partial hits
  int64_t busy_ns = 0;     // union of reads in flight (arrival-order approximation)
  int64_t cover_end = 0;
  uint64_t small_reads = 0;  // < 256 KiB
};

// NCCL kernels of one (op, rank count) joined to their calls
// (nccl_join.hpp): what bus bandwidth they reached (docs/gpu.md). Messages
// of at least kLargeCollective bytes are counted apart: below that NCCL is
// latency-bound and no link is expected to be full.
inline constexpr uint64_t kLargeCollective = uint64_t{32} << 20;
struct CollBandwidth {
  uint64_t kernels = 0, large = 0;
  double bus_bytes = 0, large_bus_bytes = 0;  // sums of S × bus factor
  int64_t ns = 0, large_ns = 0;               // sums of device time
};

struct Cumulative {
  double first = 0, last = 0;
  int64_t first_t = 0, last_t = 0;
  bool seen = false;
  void add(double v, int64_t t) {
    if (!seen) {
      first = v;
      first_t = t;
    }
    seen = true;
    last = v;
    last_t = t;
  }
  double delta() const { return last > first ? last - first : 0; }
  // Mean increase per second between the first and last sample.
  double rate() const { return last_t > first_t ? delta() / (double(last_t - first_t) / 1e9) : 0; }
};

struct RunStats {
  std::array<TierStats, 4> tiers{};  // index = format::Tier
  uint64_t qd_sum = 0, qd_reads = 0;
  uint64_t fault_reads = 0;  // storage reads that are sampled major page faults (mapped files)
  std::map<std::pair<uint32_t, uint64_t>, Cumulative> major_faults;  // (proc, tid): the sampler's counts
  std::unordered_set<uint64_t> files;  // distinct file ids (capped)
  uint64_t pre_items = 0, pre_samples = 0;
  int64_t pre_busy_ns = 0;
  std::set<std::pair<uint32_t, uint32_t>> workers;  // (track, worker)
  uint64_t batches = 0, batch_samples = 0;
  uint64_t h2d_bytes[2] = {0, 0};  // [pageable, pinned]
  int64_t h2d_ns[2] = {0, 0};
  uint64_t kernels = 0, launches = 0;
  // By (CollOp, nranks); at most kMaxCollKeys keys (nranks comes from the file).
  std::map<std::pair<uint8_t, uint32_t>, CollBandwidth> coll_bw;
  static constexpr size_t kMaxCollKeys = 256;
  uint64_t nccl_joined = 0, nccl_unjoined = 0;  // NCCL kernels with / without their call
  // Bus bandwidth (B/s) of joined large collectives on 2+ ranks, evenly
  // sampled over the run: its best ones are those no rank waited in.
  Decimated<float> large_bus_bw{4096};
  int64_t first_ns = INT64_MAX, last_ns = INT64_MIN;
  std::map<uint32_t, Cumulative> process_cpu;  // by proc
  std::map<std::pair<uint32_t, uint64_t>, Cumulative> child_cpu;  // (proc, child pid)
  std::map<uint32_t, Cumulative> throttled_periods, throttled_ns;
  RateSeries idle;  // idle CPUs, from one process's sampler
  int64_t idle_proc = -1;
  double stall_idle_integral = 0;  // idle CPUs × ns, over data stalls
  int64_t stall_idle_covered = 0;
  double step_idle_integral = 0;  // idle CPUs × ns, over whole steps
  int64_t step_idle_covered = 0;
};

}  // namespace stallscope::analyzer
