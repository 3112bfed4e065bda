// The scenario table. Each injected cause is >= 40 % of step time.
#include "scenario.hpp"

namespace scenarios {

namespace {

// Scenario 9: ranks 0-3 read their own fast mount; the injection points
// rank 3 at a slow one instead (the last --rank-data for a rank wins).
std::vector<std::string> per_rank_mounts() {
  std::vector<std::string> v = {"--compute-ms=15", "--grad-mb=1", "--loader-queue-depth=1",
                                "--loader-batch-size=8", "--loader-workers=1"};
  for (int r = 0; r < 4; ++r) v.push_back("--rank-data=" + std::to_string(r) + "={MNT" + std::to_string(r) + "}");
  return v;
}

}  // namespace

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<std::string> small = {"--samples", "1200", "--size-kb", "64"};
  static const std::vector<std::string> tiny = {"--samples", "3000", "--size-kb", "8"};
  static const std::vector<Scenario> v = {
      {.id = 1, .name = "storage-bound on a slow FUSE mount, queue depth 1",
       .gen = small, .common = {"--compute-ms=10", "--loader-batch-size=16"},
       .inject = {"--loader-queue-depth=1"},
       .cause_part = "data.storage", .remedy = "raise_queue_depth", .fuse = true,
       .slowfs = {"--latency-us", "2000"}},
      {.id = 2, .name = "storage-bound, small random reads at queue depth 1 (FUSE latency)",
       .gen = tiny, .common = {"--compute-ms=10", "--loader-batch-size=16"},
       .inject = {"--loader-queue-depth=1"},
       .cause_part = "data.storage", .remedy = "raise_queue_depth", .fuse = true,
       .slowfs = {"--latency-us", "1500"}},
      {.id = 3, .name = "preprocessing-bound, fewer workers than CPUs",
       // The calibration keeps the augment cost out: with it, two workers
       // are already near the limit on two loaded cores.
       .gen = small, .common = {"--compute-ms=15"},
       .inject = {"--loader-workers=1", "--decode-us=1000"}, .cause_part = "data.preprocess",
       .remedy = "more_workers",
       .needs_idle_cpus = true},
      {.id = 4, .name = "preprocessing-bound, CPU budget exhausted (taskset one CPU)",
       .gen = small, .common = {"--compute-ms=15", "--decode-us=600", "--loader-workers=2"},
       .inject = {}, .cause_part = "data.preprocess", .remedy = "cache_decoded", .taskset = "0"},
      {.id = 5, .name = "H2D-bound, pageable staging memory",
       .gen = small, .common = {"--compute-ms=8", "--sample-bytes=262144", "--loader-pageable-gbps=0.4",
                                "--loader-pinned-gbps=8"},
       .inject = {"--loader-pinned=off"}, .cause_part = "copy.h2d", .remedy = "pinned_memory"},
      {.id = 6, .name = "H2D exposed: pinned, but copied on the compute stream",
       .gen = small, .common = {"--compute-ms=16", "--sample-bytes=262144", "--loader-pinned-gbps=0.6"},
       .inject = {"--copy-in-step"}, .cause_part = "copy.h2d", .remedy = "overlap_copies"},
      {.id = 7, .name = "compute-bound (healthy)",
       .gen = small, .common = {"--compute-ms=25"}, .inject = {}, .cause_part = "", .remedy = "healthy"},
      {.id = 8, .name = "communication-bound on 2 ranks, large gradients, no overlap",
       .gen = small, .common = {"--compute-ms=40", "--bus-gbps=10", "--grad-mb=0.01", "--loader-batch-size=16"},
       .inject = {"--grad-mb=320"}, .cause_part = "comm.transfer", .remedy = "overlap_comm", .ranks = 2},
      {.id = 9, .name = "straggler: rank 3 of 4 reads a slow FUSE mount",
       .gen = {"--samples", "800", "--size-kb", "16"}, .common = per_rank_mounts(),
       .inject = {"--rank-data=3={MNT4}"}, .cause_part = "comm.straggler_wait", .remedy = "raise_queue_depth",
       .mounts = {{}, {}, {}, {}, {"--latency-us", "5000"}}, .ranks = 4, .remedy_rank = 3,
       .straggler_rank = 3},
      // Prefetch 1: each batch is read (all at once, one FUSE latency) and
      // only then decoded by one worker, so both stages stall every step,
      // one after the other: storage for the part of the latency the
      // previous step does not cover, preprocessing for the decode. Small
      // batches, so that the calibration (sixteen batches in flight) hides
      // the latency with the ~12 requests a FUSE mount serves at once; both
      // causes are large (~10 ms each) against the few ms the emulated
      // device overshoots on loaded cores.
      {.id = 10, .name = "mixed: storage and preprocessing both near the limit",
       .gen = small, .common = {"--compute-ms=8", "--loader-batch-size=2", "--decode-us=100",
                                "--loader-queue-depth=64", "--loader-prefetch=16"},
       .inject = {"--loader-prefetch=1", "--loader-workers=1", "--decode-us=4000"},
       .cause_part = "data.preprocess", .also_parts = {"data.storage"}, .remedy = "local_copy",
       .also_remedy = {"cache_decoded", "more_workers"}, .fuse = true,
       .slowfs = {"--latency-us", "40000", "-o", "max_threads=64"}},  // libfuse serves 10 at once by default
      {.id = 11, .name = "sync each step, then host work",
       // The host work blocks rather than burns CPU: burnt, its wall time
       // on cores other processes load grows past the compute it must hide
       // behind in the calibration.
       .gen = small, .common = {"--compute-ms=15", "--host-ms=12", "--host-sleep"},
       .inject = {"--sync-each-step"}, .cause_part = "host.after_sync", .remedy = "avoid_sync"},
  };
  return v;
}

}  // namespace scenarios
