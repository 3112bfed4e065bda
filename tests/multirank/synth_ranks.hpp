// Test helper: a synthetic multi-rank run in lockstep, built in memory.
// Every step of every rank: a data wait (storage reads on a worker meanwhile),
// compute, an all-reduce that completes for all ranks when the last rank has
// arrived plus the transfer time, then an update. Each host's clocks can be
// off: its wall clock by `wall_error_ns`, its monotonic clock drifting.
//
//   SynthSpec s; s.ranks = 4; s.stall_ms = {0, 0, 30, 0};
//   Report rep = synth_report(s);  // analyzed per rank, cross pass not run
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/multirank.hpp"

namespace stallscope::testing {

struct SynthHost {
  int64_t wall_error_ns = 0;  // its CLOCK_REALTIME minus the true time
  double drift_ppm = 0;       // its monotonic clock runs this much fast
  int64_t mono_shift_ns = 0;  // its monotonic zero
};

struct SynthSpec {
  size_t ranks = 4;
  size_t ranks_per_host = 1;
  size_t steps = 60;
  std::vector<double> stall_ms;  // per rank mean data stall (storage); missing = 0
  double stall_jitter_ms = 0;    // uniform ± on every stall
  // Per rank: each batch's read takes this long and ends when the stall
  // does (it may start in the previous step: prefetch); missing = the stall.
  std::vector<double> read_ms;
  double compute_ms = 20, transfer_ms = 5, update_ms = 1;
  double arrival_jitter_ms = 0.05;   // uniform ± on compute
  double completion_jitter_us = 20;  // uniform ± on each rank's recorded completion
  double step_gap_ms = 0;            // idle between steps (long runs)
  std::vector<SynthHost> hosts;      // per host; missing = exact clocks
  uint64_t seed = 1;
};

struct SynthRun {
  std::vector<analyzer::RankTrace> traces;
  std::vector<int64_t> true_start_ns;  // true time of each step start
  SynthSpec spec;

  size_t host_of(size_t r) const { return r / spec.ranks_per_host; }
  const SynthHost host(size_t r) const {
    return host_of(r) < spec.hosts.size() ? spec.hosts[host_of(r)] : SynthHost{};
  }
  // The rank's monotonic clock at true time t.
  int64_t mono(size_t r, int64_t t) const {
    const SynthHost h = host(r);
    return t + h.mono_shift_ns + std::llround(h.drift_ppm * 1e-6 * static_cast<double>(t));
  }
  int64_t realtime_offset(size_t r) const {  // real − mono at the start (t = 0)
    const SynthHost h = host(r);
    return h.wall_error_ns - h.mono_shift_ns;
  }
};

inline int64_t synth_ns(double ms) { return std::llround(ms * 1e6); }

inline SynthRun synth_run(const SynthSpec& s) {
  using analyzer::Ev;
  using analyzer::Kind;
  SynthRun run;
  run.spec = s;
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<double> u(-1, 1);
  run.traces.resize(s.ranks);
  for (size_t r = 0; r < s.ranks; ++r) {
    auto& t = run.traces[r];
    t.rank = static_cast<int64_t>(r);
    t.procs.push_back({});
    t.procs[0].pid = static_cast<uint32_t>(1000 + r);
    t.procs[0].host = "host" + std::to_string(run.host_of(r));
    t.tracks.push_back({0, format::TrackType::kThread, 1000, 0, "trainer"});
    t.tracks.push_back({0, format::TrackType::kGpuStream, 7, 0, "stream 7"});
    t.tracks.push_back({0, format::TrackType::kThread, 1001, 0, "worker"});
  }
  int64_t start = synth_ns(1000);
  std::vector<int64_t> stall(s.ranks), arrive(s.ranks);
  for (size_t k = 0; k < s.steps; ++k) {
    run.true_start_ns.push_back(start);
    int64_t last = 0;
    for (size_t r = 0; r < s.ranks; ++r) {
      const double base = r < s.stall_ms.size() ? s.stall_ms[r] : 0;
      stall[r] = synth_ns(std::max(0.0, base + s.stall_jitter_ms * u(rng)));
      arrive[r] = start + stall[r] + synth_ns(s.compute_ms + s.arrival_jitter_ms * u(rng));
      last = std::max(last, arrive[r]);
    }
    const int64_t done = last + synth_ns(s.transfer_ms);
    const int64_t end = done + synth_ns(s.update_ms);
    for (size_t r = 0; r < s.ranks; ++r) {
      auto& t = run.traces[r];
      auto m = [&](int64_t x) { return run.mono(r, x); };
      const int64_t rec_done = done + std::llround(s.completion_jitter_us * 1e3 * u(rng));
      t.events.push_back(Ev::span(Kind::kStep, 0, m(start), m(end)).with_corr(k));
      if (stall[r] > 0) {
        Ev w = Ev::span(Kind::kDataWait, 0, m(start), m(start + stall[r]));
        w.work().batch = k + 1;
        t.events.push_back(w);
        const int64_t rd_ns = r < s.read_ms.size() ? synth_ns(s.read_ms[r]) : stall[r];
        Ev rd = Ev::span(Kind::kStorageRead, 2, m(start + stall[r] - rd_ns), m(start + stall[r]));
        rd.io().bytes = 1 << 20;
        rd.io().sample = k + 1;
        t.events.push_back(rd);
      }
      t.events.push_back(Ev::span(Kind::kKernel, 1, m(start + stall[r]), m(arrive[r])));
      Ev c = Ev::span(Kind::kCollective, 1, m(arrive[r]), m(rec_done));
      c.coll().comm = 1;
      c.coll().seq = k + 1;
      c.coll().bytes = 1 << 20;
      t.events.push_back(c);
      t.events.push_back(Ev::span(Kind::kKernel, 1, m(rec_done), m(end)));
    }
    start = end + synth_ns(s.step_gap_ms);
  }
  return run;
}

// Each rank analyzed alone, assembled as analyze_paths would (no cross pass).
inline analyzer::Report synth_report(const SynthRun& run) {
  analyzer::Report rep;
  for (size_t r = 0; r < run.traces.size(); ++r) {
    analyzer::RankReport rr = analyzer::analyze_rank(run.traces[r], {});
    rr.host = run.traces[r].procs[0].host;
    rr.realtime_offset_ns = run.realtime_offset(r);
    rr.realtime_known = true;
    rep.ranks.push_back(std::move(rr));
  }
  return rep;
}

}  // namespace stallscope::testing
