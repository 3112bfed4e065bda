#include "attribution.hpp"

#include <algorithm>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

namespace {

// The sets of one attribution, kept per thread: refilled for each step, so
// no allocation per step once their capacity has grown.
struct Scratch {
  Ivs whole, busy, t1, t2, comm_exposed, straggler, h2d, other, idle, windows, rest, launch;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Intervals from each sync return until the next device work starts.
void after_sync_windows(const StepInputs& in, const Ivs& busy, Ivs& out) {
  out.clear();
  for (int64_t r : in.sync_returns) {
    if (r < in.start || r >= in.end) continue;
    auto it = std::lower_bound(busy.begin(), busy.end(), r,
                               [](const Iv& v, int64_t t) { return v.b <= t; });
    // Inside device work already: nothing idle follows this return yet.
    if (it != busy.end() && it->a <= r) continue;
    append(out, r, it == busy.end() ? in.end : it->a);
  }
  normalize(out);
}

// Phase one without device activity: the trainer's own on-CPU time is the compute.
void cpu_only_sets(const StepInputs& in, StepSets& out) {
  Scratch& s = scratch();
  Ivs &whole = s.whole, &busy_host = s.busy, &launch = s.launch, &rest = s.rest;
  out.host.host.clear();
  out.host.after.clear();
  out.host.busy.clear();
  whole.assign(1, {in.start, in.end});
  intersect(whole, in.data_waits, out.stall);
  subtract(whole, out.stall, busy_host);
  intersect(busy_host, in.api_calls, launch);
  subtract(busy_host, launch, rest);
  out.fixed[idx(Part::kHostLaunch)] = length(launch);
  if (in.ops_known) {
    // A profiler trace: inside an operator is compute, between them host
    // overhead (on-CPU as far as the trace can tell: it has no CPU samples).
    Ivs &inside = s.t1, &between = s.t2;
    intersect(rest, in.cpu_ops, inside);
    subtract(rest, inside, between);
    out.fixed[idx(Part::kCompute)] = length(inside);
    out.fixed[idx(Part::kHostCpu)] = length(between);
    out.cpu_unknown = !between.empty();
    return;
  }
  out.cpu.assign(rest.begin(), rest.end());
  out.cpu_is_compute = true;
}

}  // namespace

void step_sets(const StepInputs& in, StepSets& out) {
  out.fixed = {};
  out.cpu_unknown = false;
  out.cpu.clear();
  out.cpu_is_compute = false;
  if (!in.device_activity) {
    cpu_only_sets(in, out);
    return;
  }
  Scratch& s = scratch();
  Ivs &whole = s.whole, &t1 = s.t1, &t2 = s.t2, &comm_exposed = s.comm_exposed, &straggler = s.straggler,
      &h2d = s.h2d, &other = s.other, &idle = s.idle, &rest = s.rest, &launch = s.launch;
  Ivs &busy = out.host.busy, &host = out.host.host, &after = out.host.after;
  PartNs& parts = out.fixed;
  whole.assign(1, {in.start, in.end});
  // Priority: compute > communication > H2D > other device work.
  parts[idx(Part::kCompute)] = length(in.compute);
  subtract(in.comm, in.compute, comm_exposed);
  intersect(comm_exposed, in.straggler, straggler);
  parts[idx(Part::kStragglerWait)] = length(straggler);
  parts[idx(Part::kCommTransfer)] = length(comm_exposed) - length(straggler);
  unite(in.compute, in.comm, t1);
  subtract(in.h2d, t1, h2d);
  parts[idx(Part::kCopyH2D)] = length(h2d);
  unite(t1, in.h2d, t2);
  subtract(in.other, t2, other);
  parts[idx(Part::kCopyOther)] = length(other);
  unite(t2, in.other, busy);
  // Device idle: the trainer waits for data, or the host is the cause.
  subtract(whole, busy, idle);
  intersect(idle, in.data_waits, out.stall);
  subtract(idle, out.stall, host);
  // The host's time: after a sync, in a launch call, else on or off CPU.
  after_sync_windows(in, busy, s.windows);
  intersect(host, s.windows, after);
  subtract(host, after, rest);
  intersect(rest, in.api_calls, launch);
  subtract(rest, launch, out.cpu);
  parts[idx(Part::kHostAfterSync)] = length(after);
  parts[idx(Part::kHostLaunch)] = length(launch);
}

StepParts step_parts(const StepSets& s, const DataSplit& split, int64_t trainer_cpu_ns) {
  StepParts out;
  out.parts = s.fixed;
  out.cpu_unknown = s.cpu_unknown;
  if (const int64_t len = length(s.stall); len > 0) {
    // The splitter's pieces must cover the stall exactly; any rounding goes to unknown.
    DataSplit d = split;
    d.storage = std::clamp<int64_t>(d.storage, 0, len);
    d.preprocess = std::clamp<int64_t>(d.preprocess, 0, len - d.storage);
    d.handoff = std::clamp<int64_t>(d.handoff, 0, len - d.storage - d.preprocess);
    out.parts[idx(Part::kDataStorage)] = d.storage;
    out.parts[idx(Part::kDataPreprocess)] = d.preprocess;
    out.parts[idx(Part::kDataHandoff)] = d.handoff;
    out.parts[idx(Part::kDataUnknown)] = len - d.storage - d.preprocess - d.handoff;
    out.split = d.bits;
  }
  if (const int64_t len = length(s.cpu); len > 0) {
    // On-CPU ns within the set, clamped to its length; all of it when unknown.
    int64_t cpu = len;
    if (trainer_cpu_ns < 0) out.cpu_unknown = true;
    else cpu = std::clamp<int64_t>(trainer_cpu_ns, 0, len);
    out.parts[idx(s.cpu_is_compute ? Part::kCompute : Part::kHostCpu)] += cpu;
    out.parts[idx(Part::kHostBlocked)] += len - cpu;
  }
  return out;
}

StepParts attribute_step(const StepInputs& in, HostSets* host_out) {
  thread_local StepSets s;
  step_sets(in, s);
  if (host_out != nullptr) *host_out = s.host;
  return step_parts(s, DataSplit{.unknown = length(s.stall), .bits = kSplitNone}, -1);
}

}  // namespace stallscope::analyzer
