#include "attribution.hpp"

#include <algorithm>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

namespace {

// The sets of one attribution, kept per thread: refilled for each step, so
// no allocation per step once their capacity has grown.
struct Scratch {
  Ivs whole, busy, t1, t2, comm_exposed, straggler, h2d, other, idle, stall, host;
  Ivs windows, after, rest, launch, rest2;
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

// On-CPU ns within `set`, clamped to its length; all of it when unknown.
int64_t cpu_within(const StepInputs& in, const Ivs& set, bool* unknown) {
  const int64_t len = length(set);
  if (len == 0) return 0;
  const int64_t cpu = in.trainer_cpu ? in.trainer_cpu(set) : -1;
  if (cpu < 0) {
    *unknown = true;
    return len;
  }
  return std::clamp<int64_t>(cpu, 0, len);
}

void split_data(const StepInputs& in, const Ivs& stall, StepParts& out) {
  const int64_t len = length(stall);
  if (len == 0) return;
  DataSplit d = in.split_stall ? in.split_stall(stall) : DataSplit{.unknown = len, .bits = kSplitNone};
  // The splitter's pieces must cover the stall exactly; any rounding goes to unknown.
  d.storage = std::clamp<int64_t>(d.storage, 0, len);
  d.preprocess = std::clamp<int64_t>(d.preprocess, 0, len - d.storage);
  d.handoff = std::clamp<int64_t>(d.handoff, 0, len - d.storage - d.preprocess);
  out.parts[idx(Part::kDataStorage)] = d.storage;
  out.parts[idx(Part::kDataPreprocess)] = d.preprocess;
  out.parts[idx(Part::kDataHandoff)] = d.handoff;
  out.parts[idx(Part::kDataUnknown)] = len - d.storage - d.preprocess - d.handoff;
  out.split = d.bits;
}

void split_host(const StepInputs& in, const Ivs& host, const Ivs& busy, StepParts& out) {
  Scratch& s = scratch();
  Ivs &after = s.after, &rest = s.rest, &launch = s.launch, &rest2 = s.rest2;
  after_sync_windows(in, busy, s.windows);
  intersect(host, s.windows, after);
  subtract(host, after, rest);
  intersect(rest, in.api_calls, launch);
  subtract(rest, launch, rest2);
  const int64_t cpu = cpu_within(in, rest2, &out.cpu_unknown);
  out.parts[idx(Part::kHostAfterSync)] = length(after);
  out.parts[idx(Part::kHostLaunch)] = length(launch);
  out.parts[idx(Part::kHostCpu)] = cpu;
  out.parts[idx(Part::kHostBlocked)] = length(rest2) - cpu;
}

// No device activity recorded: the trainer's own on-CPU time is the compute.
StepParts attribute_cpu_only(const StepInputs& in) {
  StepParts out;
  Scratch& s = scratch();
  Ivs &whole = s.whole, &stall = s.stall, &busy_host = s.busy, &launch = s.launch, &rest = s.rest;
  whole.assign(1, {in.start, in.end});
  intersect(whole, in.data_waits, stall);
  subtract(whole, stall, busy_host);
  intersect(busy_host, in.api_calls, launch);
  subtract(busy_host, launch, rest);
  out.parts[idx(Part::kHostLaunch)] = length(launch);
  split_data(in, stall, out);
  if (in.ops_known) {
    // A profiler trace: inside an operator is compute, between them host
    // overhead (on-CPU as far as the trace can tell: it has no CPU samples).
    Ivs &inside = s.t1, &between = s.t2;
    intersect(rest, in.cpu_ops, inside);
    subtract(rest, inside, between);
    out.parts[idx(Part::kCompute)] = length(inside);
    out.parts[idx(Part::kHostCpu)] = length(between);
    out.cpu_unknown = out.cpu_unknown || !between.empty();
    return out;
  }
  const int64_t cpu = cpu_within(in, rest, &out.cpu_unknown);
  out.parts[idx(Part::kCompute)] = cpu;
  out.parts[idx(Part::kHostBlocked)] = length(rest) - cpu;
  return out;
}

}  // namespace

StepParts attribute_step(const StepInputs& in, HostSets* host_out) {
  if (!in.device_activity) {
    if (host_out != nullptr) {
      host_out->host.clear();
      host_out->after.clear();
      host_out->busy.clear();
    }
    return attribute_cpu_only(in);
  }
  StepParts out;
  Scratch& s = scratch();
  Ivs &whole = s.whole, &busy = s.busy, &t1 = s.t1, &t2 = s.t2, &comm_exposed = s.comm_exposed,
      &straggler = s.straggler, &h2d = s.h2d, &other = s.other, &idle = s.idle, &stall = s.stall,
      &host = s.host;
  whole.assign(1, {in.start, in.end});
  // Priority: compute > communication > H2D > other device work.
  out.parts[idx(Part::kCompute)] = length(in.compute);
  subtract(in.comm, in.compute, comm_exposed);
  intersect(comm_exposed, in.straggler, straggler);
  out.parts[idx(Part::kStragglerWait)] = length(straggler);
  out.parts[idx(Part::kCommTransfer)] = length(comm_exposed) - length(straggler);
  unite(in.compute, in.comm, t1);
  subtract(in.h2d, t1, h2d);
  out.parts[idx(Part::kCopyH2D)] = length(h2d);
  unite(t1, in.h2d, t2);
  subtract(in.other, t2, other);
  out.parts[idx(Part::kCopyOther)] = length(other);
  unite(t2, in.other, busy);
  // Device idle: the trainer waits for data, or the host is the cause.
  subtract(whole, busy, idle);
  intersect(idle, in.data_waits, stall);
  subtract(idle, stall, host);
  split_data(in, stall, out);
  split_host(in, host, busy, out);
  if (host_out != nullptr) {
    host_out->host.assign(host.begin(), host.end());
    host_out->after.assign(s.after.begin(), s.after.end());
    host_out->busy.assign(busy.begin(), busy.end());
  }
  return out;
}

}  // namespace stallscope::analyzer
