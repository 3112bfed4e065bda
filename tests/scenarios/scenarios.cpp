// The scenario table. Each injected cause is >= 40 % of step time.
#include "scenario.hpp"

namespace scenarios {

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<std::string> small = {"--samples", "1200", "--size-kb", "64"};
  static const std::vector<Scenario> v = {
      {.id = 1, .name = "storage-bound on a slow FUSE mount, queue depth 1",
       .gen = small, .common = {"--compute-ms=10", "--loader-batch-size=16"},
       .inject = {"--loader-queue-depth=1"},
       .cause_part = "data.storage", .remedy = "raise_queue_depth", .fuse = true,
       .slowfs = {"--latency-us", "2000"}},
      {.id = 3, .name = "preprocessing-bound, fewer workers than CPUs",
       .gen = small, .common = {"--compute-ms=15", "--decode-us=1000"},
       .inject = {"--loader-workers=1"}, .cause_part = "data.preprocess", .remedy = "more_workers",
       .needs_idle_cpus = true},
      {.id = 4, .name = "preprocessing-bound, CPU budget exhausted (taskset one CPU)",
       .gen = small, .common = {"--compute-ms=15", "--decode-us=600", "--loader-workers=2"},
       .inject = {}, .cause_part = "data.preprocess", .remedy = "cache_decoded", .taskset = "0"},
      {.id = 5, .name = "H2D-bound, pageable staging memory",
       .gen = small, .common = {"--compute-ms=8", "--sample-bytes=262144", "--loader-pageable-gbps=0.4",
                                "--loader-pinned-gbps=8"},
       .inject = {"--loader-pinned=off"}, .cause_part = "copy.h2d", .remedy = "pinned_memory"},
      {.id = 7, .name = "compute-bound (healthy)",
       .gen = small, .common = {"--compute-ms=25"}, .inject = {}, .cause_part = "", .remedy = "healthy"},
      {.id = 11, .name = "sync each step, then host work",
       .gen = small, .common = {"--compute-ms=15", "--host-ms=10"},
       .inject = {"--sync-each-step"}, .cause_part = "host.after_sync", .remedy = "avoid_sync"},
  };
  return v;
}

}  // namespace scenarios
