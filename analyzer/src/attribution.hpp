// The attribution core: one step's wall time split into exclusive parts
// (DESIGN.md "How a step is attributed"), from interval sets already clipped
// to the step. Pure: facts in, parts out — no I/O, no call back into the
// engine, and no state a result depends on (its working sets are reused
// per thread); the parts always sum to end - start. Two facts come from
// outside, about sets only the attribution finds: phase one (step_sets)
// gives the data stall to split and the trainer time whose on-CPU share is
// asked; the engine answers; phase two (step_parts) sums the parts.
//
//   StepSets s;  step_sets(in, s);
//   const DataSplit d = s.stall.empty() ? DataSplit{} : split(s.stall);
//   const int64_t cpu = s.cpu.empty() ? 0 : trainer_cpu(s.cpu);  // -1: unknown
//   StepParts p = step_parts(s, d, cpu);
#pragma once

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

// Phase one's sets of a step.
struct StepSets {
  PartNs fixed{};  // the parts no outside fact changes (device, after-sync, launch, operators)
  bool cpu_unknown = false;  // operators, not CPU samples, told compute from host time
  // The data stall (normalized): its split into storage, preprocessing,
  // hand-off and unknown is the engine's (lineage, loaders).
  Ivs stall;
  // Trainer time whose on-CPU ns are compute (no device activity) or host
  // CPU (device idle); the rest of it is host blocked.
  Ivs cpu;
  bool cpu_is_compute = false;
  HostSets host;  // for the host gaps' classes
};
void step_sets(const StepInputs& in, StepSets& out);
// Phase two: `split` of out.stall (its pieces clamped to the stall; the
// rest unknown), `trainer_cpu_ns` on CPU within out.cpu (-1: unknown, all
// of it counted on CPU).
StepParts step_parts(const StepSets& s, const DataSplit& split, int64_t trainer_cpu_ns);
// Both phases with nothing known from outside: the stall unsplit, the CPU unknown.
StepParts attribute_step(const StepInputs& in, HostSets* host_out = nullptr);

}  // namespace stallscope::analyzer
