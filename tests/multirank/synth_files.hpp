// Synthetic multi-rank traces written through the trace format (one .sst
// file per rank, TraceBuilder of tests/libtrace), for the 256-rank test and
// bench/multirank_bench. The run is in lockstep, as synth_ranks.hpp, but
// computed without holding every rank in memory: each (rank, step) draws its
// randomness from a hash, so pass 1 finds every collective's completion and
// pass 2 writes one rank at a time.
//
//   SynthFilesSpec s; s.ranks = 256; s.steps = 2000; s.straggler = 77;
//   write_synth_files(s, "/tmp/run");   // host<h>-r<rank>.sst
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "libtrace/trace_builder.hpp"

namespace stallscope::testing {

struct SynthFilesSpec {
  size_t ranks = 256, ranks_per_host = 8, steps = 2000;
  double compute_ms = 20, transfer_ms = 4, update_ms = 1;
  double stall_ms = 2, stall_jitter_ms = 1;  // every rank's data stall (storage), uniform ±
  double compute_jitter_ms = 0.2;
  size_t kernels_per_step = 1;  // the compute split into this many kernels
  double completion_jitter_us = 20;
  int64_t straggler = -1;  // this rank stalls `straggler_ms` more (its storage)
  double straggler_ms = 15;
  double host_offset_ms = 50;   // hosts' wall clocks off by up to ± this
  double host_drift_ppm = 20;   // and their clocks drifting by up to ± this
  size_t steps_per_chunk = 16;  // ~0.5 s a chunk: well within the analyzer's 2 s lag
  uint64_t seed = 7;
};

namespace synth_detail {

inline uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
// Uniform in [-1, 1) for (seed, a, b, what).
inline double u(uint64_t seed, uint64_t a, uint64_t b, uint64_t what) {
  const uint64_t h = mix(seed ^ mix(a * 0x100000001B3ULL ^ mix(b ^ (what << 56))));
  return static_cast<double>(h >> 11) / static_cast<double>(1ULL << 52) - 1.0;
}
inline int64_t ns(double ms) { return std::llround(ms * 1e6); }

}  // namespace synth_detail

class SynthFiles {
 public:
  explicit SynthFiles(const SynthFilesSpec& s) : s_(s) { schedule(); }

  size_t host_of(size_t r) const { return r / s_.ranks_per_host; }
  int64_t wall_error_ns(size_t h) const {
    return synth_detail::ns(s_.host_offset_ms * synth_detail::u(s_.seed, h, 0, 1));
  }
  double drift(size_t h) const {
    return s_.host_drift_ppm * 1e-6 * synth_detail::u(s_.seed, h, 0, 2);
  }
  // The host's monotonic clock at true time t (hosts differ in zero and rate).
  int64_t mono(size_t r, int64_t t) const {
    const size_t h = host_of(r);
    return t + static_cast<int64_t>(h) * 3'000'000'000LL +
           std::llround(drift(h) * static_cast<double>(t));
  }
  int64_t stall_ns(size_t r, size_t k) const {
    double ms = s_.stall_ms + s_.stall_jitter_ms * synth_detail::u(s_.seed, r, k, 3);
    if (static_cast<int64_t>(r) == s_.straggler) ms += s_.straggler_ms;
    return synth_detail::ns(std::max(0.0, ms));
  }
  int64_t arrival(size_t r, size_t k) const {
    return start_[k] + stall_ns(r, k) +
           synth_detail::ns(s_.compute_ms +
                            s_.compute_jitter_ms * synth_detail::u(s_.seed, r, k, 4));
  }
  size_t events_per_step() const { return 5 + s_.kernels_per_step; }
  size_t events_per_rank() const { return s_.steps * events_per_step(); }

  void write_rank(size_t r, const std::string& path) const;
  void write_all(const std::string& dir) const {
    for (size_t r = 0; r < s_.ranks; ++r)
      write_rank(r, dir + "/host" + std::to_string(host_of(r)) + "-r" + std::to_string(r) + ".sst");
  }

 private:
  void schedule() {
    int64_t t = 1'000'000'000;
    for (size_t k = 0; k < s_.steps; ++k) {
      start_.push_back(t);
      int64_t last = 0;
      for (size_t r = 0; r < s_.ranks; ++r) last = std::max(last, arrival(r, k));
      done_.push_back(last + synth_detail::ns(s_.transfer_ms));
      t = done_.back() + synth_detail::ns(s_.update_ms);
    }
    start_.push_back(t);
  }
  void add_step(size_t r, size_t k, Records& trainer, Records& dev, Records& worker) const;

  SynthFilesSpec s_;
  std::vector<int64_t> start_, done_;  // true times per step
};

inline void SynthFiles::add_step(size_t r, size_t k, Records& tr, Records& dev, Records& wk) const {
  namespace f = stallscope::format;
  auto m = [&](int64_t t) { return static_cast<uint64_t>(mono(r, t)); };
  const int64_t s = start_[k], st = stall_ns(r, k), a = arrival(r, k), end = start_[k + 1];
  const int64_t done =
      done_[k] + std::llround(s_.completion_jitter_us * 1e3 * synth_detail::u(s_.seed, r, k, 5));
  auto step = make_ext<f::StepExt>(f::Ext::kStep, 1);
  step.index = k;
  tr.core(f::Kind::kStep, 0, m(s), m(end) - m(s), 0, k).ext(step);
  auto w = make_ext<f::WorkExt>(f::Ext::kWork, 1);
  w.batch_id = k + 1;
  tr.core(f::Kind::kDataWait, 0, m(s), m(s + st) - m(s), 0, k + 1).ext(w);
  auto io = make_ext<f::IoExt>(f::Ext::kIo, 3);
  io.bytes = 1 << 20;
  io.sample_id = k + 1;
  io.tier = static_cast<uint8_t>(f::Tier::kNetwork);
  wk.core(f::Kind::kStorageRead, f::kAsync, m(s), m(s + st) - m(s), 3, 0).ext(io);
  const size_t nk = std::max<size_t>(1, s_.kernels_per_step);
  for (size_t i = 0; i < nk; ++i) {  // back to back, the last one ending at the arrival
    const int64_t k0 = s + st + (a - s - st) * static_cast<int64_t>(i) / static_cast<int64_t>(nk);
    const int64_t k1 =
        s + st + (a - s - st) * static_cast<int64_t>(i + 1) / static_cast<int64_t>(nk);
    dev.core(f::Kind::kKernel, 0, m(k0), m(k1) - m(k0), 2, 0);
  }
  auto c =
      make_ext<f::CollectiveExt>(f::Ext::kCollective, static_cast<uint32_t>(f::CollOp::kAllReduce));
  c.bytes = 64 << 20;
  c.comm_id = 1;
  c.seq = k + 1;
  c.rank = static_cast<uint32_t>(r);
  c.nranks = static_cast<uint32_t>(s_.ranks);
  c.peer = -1;
  dev.core(f::Kind::kCollective, 0, m(a), m(done) - m(a), 4, 0).ext(c);
  dev.core(f::Kind::kKernel, 0, m(done), m(end) - m(done), 5, 0);
}

inline void SynthFiles::write_rank(size_t r, const std::string& path) const {
  namespace f = stallscope::format;
  TraceBuilder b;
  const size_t h = host_of(r);
  const int64_t real_off = wall_error_ns(h);  // real = true + error; mono follows its own clock
  auto triple = [&](int64_t t) {
    const auto mo = mono(r, t);
    return f::ClockTriple{static_cast<uint64_t>(mo), mo, t + real_off};
  };
  b.header.pid = static_cast<uint32_t>(10000 + r);
  b.header.start = triple(start_[0] - 1'000'000);
  b.clock = b.header.start;
  b.metadata("{\"rank\":" + std::to_string(r) + ",\"host\":\"host" + std::to_string(h) +
             "\",\"world_size\":" + std::to_string(s_.ranks) + "}");
  b.strings({{1, "trainer"},
             {2, "gemm"},
             {3, "/data/shard"},
             {4, "allreduce"},
             {5, "update"},
             {6, "worker"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, f::TrackType::kGpuStream),
            thread_track(3, 101, 6)});
  for (size_t k0 = 0; k0 < s_.steps; k0 += s_.steps_per_chunk) {
    Records tr, dev, wk;
    const size_t k1 = std::min(s_.steps, k0 + s_.steps_per_chunk);
    for (size_t k = k0; k < k1; ++k) add_step(r, k, tr, dev, wk);
    b.clock = triple(start_[k1]);
    b.events({{1, tr}, {2, dev}, {3, wk}});
  }
  b.clock = triple(start_[s_.steps]);
  b.end();
  b.write(path);
}

}  // namespace stallscope::testing
