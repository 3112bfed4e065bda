// The attribution core: one step's wall time split into exclusive parts
// (DESIGN.md "How a step is attributed"), from interval sets already clipped
// to the step. Pure: no I/O, and no state a result depends on (its working
// sets are reused per thread); the parts always sum to end - start.
#pragma once

#include <functional>

#include "interval.hpp"
#include "stallscope/analyzer/parts.hpp"

namespace stallscope::analyzer {

// How a data stall was split: storage / preprocessing / unknown ns.
struct DataSplit {
  int64_t storage = 0, preprocess = 0, unknown = 0;
  int64_t handoff = 0;  // a ready batch passed between processes
  uint8_t bits = 0;  // SplitBits
};

struct StepInputs {
  int64_t start = 0, end = 0;
  // Device side, each normalized and clipped to [start, end).
  Ivs compute, comm, straggler, h2d, other;
  bool device_activity = true;  // false: the rank recorded no device work at all
  // Trainer thread, normalized and clipped.
  Ivs data_waits, api_calls;
  std::vector<int64_t> sync_returns;  // ends of blocking syncs / D2H copies, sorted
  // The trainer's CPU operators (RankTrace::trainer_ops), clipped; with no
  // device activity they, not CPU samples, tell compute from host overhead.
  bool ops_known = false;
  Ivs cpu_ops;
  // CPU ns the trainer thread used within a set of intervals (-1: unknown).
  std::function<int64_t(const Ivs&)> trainer_cpu;
  // Splits stalled intervals (normalized) into storage / preprocessing / unknown.
  std::function<DataSplit(const Ivs&)> split_stall;
};

struct StepParts {
  PartNs parts{};
  uint8_t split = 0;         // SplitBits of the data stall
  bool cpu_unknown = false;  // no CPU samples: host/compute time not split by CPU
};

// The sets behind the host parts, for what classes their gaps
// (host_gaps.hpp): `host` is the device-idle time outside data stalls (its
// length is the host parts' sum), `after` the after-sync windows in it,
// `busy` the device's work. `host` stays empty without device activity.
struct HostSets {
  Ivs host, after, busy;
};

// `host_out`, when given, receives the host sets of the step.
StepParts attribute_step(const StepInputs& in, HostSets* host_out = nullptr);

}  // namespace stallscope::analyzer
