#include "capacity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace stallscope::analyzer {

namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

std::string pct(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", share * 100);
  return buf;
}

double share(const RankReport& r, Part p) { return r.parts[idx(p)].share; }

double data_share(const RankReport& r) {
  double v = 0;
  for (size_t p = 0; p < kPartCount; ++p)
    if (is_data(Part(p))) v += share(r, Part(p));
  return v;
}

// Batches per second the trainer would take if data were never late.
double demand_per_s(const RankReport& r) {
  double busy_ms = mean_step_ms(r);
  for (size_t p = 0; p < kPartCount; ++p)
    if (is_data(Part(p))) busy_ms -= mean_part_ms(r, Part(p));
  return busy_ms > 0 ? 1000.0 / busy_ms : 0;
}

double wall_s(const RunStats& s) {
  return s.last_ns > s.first_ns ? static_cast<double>(s.last_ns - s.first_ns) / 1e9 : 0;
}

double batches_per_step(const RankReport& r, const RunStats& s) {
  return s.batches > 0 && !r.steps.empty() ? ratio(double(s.batches), double(r.steps.size())) : 1.0;
}

Stage storage_stage(const RankReport& r, const RunStats& s) {
  Stage st{StageKind::kStorage};
  uint64_t bytes = 0, miss = 0, classified = 0, reads = 0;
  int64_t busy = 0;
  for (const auto& t : s.tiers) {
    bytes += t.bytes;
    miss += t.miss_bytes;
    classified += t.classified_bytes;
    busy += t.busy_ns;
    reads += t.reads;
  }
  if (reads == 0) return st;
  st.measured = true;
  const double bw = ratio(double(bytes), double(busy) / 1e9);
  const double per_batch = ratio(double(bytes), double(std::max<uint64_t>(s.batches, r.steps.size())));
  st.utilization = ratio(double(busy) / 1e9, wall_s(s));
  st.capacity = ratio(bw, per_batch);
  st.busy_per_item_ms = ratio(double(busy) / 1e6, double(reads));
  st.figures = {{Fig::kBytesPerBatch, per_batch}, {Fig::kReadBandwidth, bw},
                {Fig::kReads, double(reads)},
                {Fig::kMeanReadBytes, ratio(double(bytes), double(reads))},
                {Fig::kFiles, double(s.files.size())},
                {Fig::kReadsWithQueueDepth, double(s.qd_reads)}};
  // Page-cache misses, scaled up from the reads whose state is known (all
  // of the loader's; one small read in N of the preload shim's); absent
  // when none is known.
  if (classified > 0) {
    st.figures.push_back({Fig::kCacheMissBytes, double(bytes) * double(miss) / double(classified)});
    st.figures.push_back({Fig::kCacheClassifiedBytes, double(classified)});
  }
  // Only reads that carry a queue depth tell it; absent when none did.
  if (s.qd_reads > 0) st.figures.push_back({Fig::kMeanQueueDepth, ratio(double(s.qd_sum), double(s.qd_reads))});
  return st;
}

// Capacity = workers / busy time per batch. The loader's own configuration
// says how many workers there are when it was recorded; otherwise the
// distinct (thread, worker) pairs seen. Per-sample time divides by the
// samples delivered, so a collate covering a whole batch after its
// transforms does not count the batch's samples twice.
Stage preprocess_stage(const RankReport& r, const RunStats& s, const RankTrace& t) {
  Stage st{StageKind::kPreprocess};
  if (s.pre_items == 0) return st;
  st.measured = true;
  const double workers = t.probes.workers > 0 ? t.probes.workers : double(s.workers.size());
  const double samples = s.batch_samples > 0 ? double(s.batch_samples) : double(s.pre_samples);
  const double per_sample_s = ratio(double(s.pre_busy_ns) / 1e9, samples);
  const double samples_per_batch =
      s.batches > 0 ? ratio(double(s.batch_samples), double(s.batches))
                    : ratio(double(s.pre_samples), double(std::max<size_t>(r.steps.size(), 1)));
  st.utilization = ratio(double(s.pre_busy_ns) / 1e9, workers * wall_s(s));
  st.capacity = ratio(workers, per_sample_s * samples_per_batch);
  st.workers = workers;
  st.busy_per_item_ms = per_sample_s * 1e3;
  st.figures = {{Fig::kWorkers, workers}, {Fig::kBusyPerSample, per_sample_s * 1e3},
                {Fig::kSamplesPerBatch, samples_per_batch}};
  return st;
}

Stage h2d_stage(const RankReport& r, const RunStats& s) {
  Stage st{StageKind::kPinH2D};
  const uint64_t bytes = s.h2d_bytes[0] + s.h2d_bytes[1];
  if (bytes == 0) return st;
  st.measured = true;
  const int64_t ns = s.h2d_ns[0] + s.h2d_ns[1];
  const double per_step = ratio(double(bytes), double(std::max<size_t>(r.steps.size(), 1)));
  st.utilization = ratio(double(ns) / 1e9, wall_s(s));
  st.capacity = ratio(ratio(double(bytes), double(ns) / 1e9), per_step);
  st.figures = {{Fig::kBytesPerStep, per_step},
                {Fig::kPageableBandwidth, ratio(double(s.h2d_bytes[0]), double(s.h2d_ns[0]) / 1e9)},
                {Fig::kPinnedBandwidth, ratio(double(s.h2d_bytes[1]), double(s.h2d_ns[1]) / 1e9)},
                {Fig::kPageableBytes, double(s.h2d_bytes[0])}};
  return st;
}

// A stage of the DataLoader: `workers` each taking `per_batch_ms` per batch.
Stage loader_stage(StageKind k, double workers, double per_batch_ms, double batches, double wall) {
  Stage st{k};
  st.measured = true;
  st.workers = workers;
  st.busy_per_item_ms = per_batch_ms;
  st.capacity = ratio(workers * 1000.0, per_batch_ms);
  st.utilization = ratio(batches * per_batch_ms / 1000.0, workers * wall);
  return st;
}

// Where the hooks recorded the loader that fed the optimizer, its stages
// come from its batches: preprocessing = the workers' fetches (num_workers
// of them), collate, and trainer_load = the hand-off to the trainer (or,
// with num_workers=0, the whole fetch on the trainer thread).
void dataloader_stages(RankReport& r, const RunStats& s) {
  const DataLoaderReport* l = fed_loader(r);
  if (l == nullptr || l->fetch_ms <= 0) return;
  const double batches = double(l->batches), wall = wall_s(s);
  const double per_sample = l->getitem_ms > 0 ? l->getitem_ms
                            : l->batch_size > 0 ? l->fetch_ms / l->batch_size : l->fetch_ms;
  const double samples = l->batch_size > 0 ? double(l->batch_size) : 1.0;
  auto at = [&](StageKind k) -> Stage& {
    for (auto& st : r.stages) if (st.kind == k) return st;
    return r.stages.emplace_back(Stage{k});
  };
  const double nw = l->num_workers;
  if (nw > 0) {
    Stage& pre = at(StageKind::kPreprocess);
    pre = loader_stage(StageKind::kPreprocess, nw, l->fetch_ms, batches, wall);
    pre.figures = {{Fig::kWorkers, nw}, {Fig::kBusyPerSample, per_sample},
                   {Fig::kSamplesPerBatch, samples}, {Fig::kFetchPerBatch, l->fetch_ms}};
    if (l->handoff_ms > 0) {
      Stage& tl = at(StageKind::kTrainerLoad);
      tl = loader_stage(StageKind::kTrainerLoad, 1, l->handoff_ms, batches, wall);
      tl.figures = {{Fig::kHandoffPerBatch, l->handoff_ms}};
    }
  } else {
    Stage& tl = at(StageKind::kTrainerLoad);
    tl = loader_stage(StageKind::kTrainerLoad, 1, l->fetch_ms, batches, wall);
    tl.figures = {{Fig::kWorkers, 0}, {Fig::kBusyPerSample, per_sample},
                  {Fig::kSamplesPerBatch, samples}, {Fig::kFetchPerBatch, l->fetch_ms}};
  }
  if (l->collate_ms > 0) {
    Stage& co = at(StageKind::kCollate);
    co = loader_stage(StageKind::kCollate, std::max(nw, 1.0), l->collate_ms, batches, wall);
    co.figures = {{Fig::kCollatePerBatch, l->collate_ms}};
  }
}

// The producers behind the trainer's channels and relays (FeedReport):
// `producers` workers each busy `busy_ms_per_item` per item, on CPU or in
// storage reads, `items_per_step` items per step. Not where the DataLoader
// hooks describe the feed (their stages do, from the same batches).
Stage producer_stage(const RankReport& r, const RunStats& s) {
  Stage st{StageKind::kProducers};
  const FeedReport& f = r.feed;
  if (!f.found || f.producers.empty() || fed_loader(r) != nullptr) return st;
  st.measured = true;
  const double workers = double(f.producers.size());
  st.workers = workers;
  st.busy_per_item_ms = f.busy_ms_per_item;
  st.on_cpu_per_item_ms = f.cpu_ms_per_item;
  st.blocked_per_item_ms = f.busy_ms_per_item >= 0 ? f.storage_ms_per_item : -1;
  const double per_step = std::max(f.items_per_step, 1e-9);
  if (f.busy_ms_per_item > 0) {
    st.capacity = ratio(workers * 1000.0, f.busy_ms_per_item * per_step) * batches_per_step(r, s);
    st.utilization = ratio(double(f.items) * f.busy_ms_per_item / 1000.0, workers * wall_s(s));
  }
  st.figures = {{Fig::kProducers, workers}, {Fig::kRelays, double(f.relays.size())},
                {Fig::kItemsPerStep, f.items_per_step}, {Fig::kBytesPerItem, f.bytes_per_item},
                {Fig::kWaitPerItem, f.wait_ms_per_handoff}};
  return st;
}

// NCCL kernels joined to their calls (RunStats::coll_bw): their device time
// against the wall, and the bus bandwidth they reached (docs/gpu.md).
Stage comm_stage(const RankReport& r, const RunStats& s) {
  Stage st{StageKind::kComm};
  CollBandwidth all;
  for (const auto& [key, b] : s.coll_bw) {
    all.kernels += b.kernels;
    all.large += b.large;
    all.bus_bytes += b.bus_bytes;
    all.large_bus_bytes += b.large_bus_bytes;
    all.ns += b.ns;
    all.large_ns += b.large_ns;
  }
  if (all.kernels == 0) return st;
  st.measured = true;
  st.utilization = ratio(double(all.ns) / 1e9, wall_s(s));
  const double per_step_s = ratio(double(all.ns) / 1e9, double(std::max<size_t>(r.steps.size(), 1)));
  st.capacity = ratio(batches_per_step(r, s), per_step_s);
  st.figures = {{Fig::kCollectiveKernels, double(all.kernels)},
                {Fig::kBusBandwidth, ratio(all.bus_bytes, double(all.ns) / 1e9)},
                {Fig::kLargeCollectiveKernels, double(all.large)},
                {Fig::kLargeBusBandwidth, ratio(all.large_bus_bytes, double(all.large_ns) / 1e9)},
                {Fig::kUnjoinedCollectiveKernels, double(s.nccl_unjoined)}};
  return st;
}

// CPU cores the rank's processes used on average (CPU ns per ns).
double used_cores(const RunStats& s, const RankTrace& t) {
  double ns = 0;
  for (const auto& [proc, c] : s.process_cpu) ns += c.rate();
  for (const auto& [key, c] : s.child_cpu) {
    const auto pid = key.second;  // (clang before 16 cannot capture a structured binding)
    const bool traced = std::any_of(t.procs.begin(), t.procs.end(),
                                    [&](const ProcessDesc& p) { return p.pid == pid; });
    if (!traced) ns += c.rate();  // a child without its own trace file
  }
  return ns / 1e9;
}

CpuBudget cpu_budget(const RunStats& s, const RankTrace& t) {
  CpuBudget b;
  if (t.procs.empty() || t.procs[0].affinity_cpus <= 0) return b;
  b.known = true;
  b.affinity_cpus = double(t.procs[0].affinity_cpus);
  b.quota_cores = t.procs[0].quota_cores;
  b.ranks_on_node = int(std::max<int64_t>(1, t.probes.ranks_on_node));
  const double cap = b.quota_cores > 0 ? std::min(b.affinity_cpus, b.quota_cores) : b.affinity_cpus;
  b.budget_cores = cap / b.ranks_on_node;
  b.used_cores = used_cores(s, t);
  if (s.stall_idle_covered > 0) b.idle_during_stalls = s.stall_idle_integral / double(s.stall_idle_covered);
  if (s.step_idle_covered > 0) b.idle_in_steps = s.step_idle_integral / double(s.step_idle_covered);
  for (const auto& [p, c] : s.throttled_periods) b.throttled_periods += c.delta();
  for (const auto& [p, c] : s.throttled_ns) b.throttled_ms += c.delta() / 1e6;
  return b;
}

// The CPU budget's use, and the rate the CPUs could sustain if the CPU
// work per batch stays the same.
void cpu_capacity(const RankReport& r, CpuBudget& c, double demand) {
  if (!c.known || c.used_cores <= 0) return;
  c.utilization = ratio(c.used_cores, c.budget_cores);
  c.capacity = c.utilization > 0 ? demand_per_s(r) * (1 - data_share(r)) / c.utilization : 0;
  c.demand = demand;
}

// The largest part other than compute names the cause, unless compute
// dominates (>= 90 %: healthy) or nothing else reaches 5 %.
std::string cause_of(const RankReport& r) {
  if (r.steady_steps == 0) return "no steady steps";
  if (share(r, Part::kCompute) >= 0.9) return "compute-bound (healthy)";
  Part best = Part::kStragglerWait;
  for (size_t p = 1; p < kPartCount; ++p)
    if (r.parts[p].share > r.parts[idx(best)].share) best = static_cast<Part>(p);
  if (r.parts[idx(best)].share < 0.05) return "compute-bound";
  const std::string group(part_group(best));
  const std::string kind = group == "data stall" ? "input-bound" : group + "-bound";
  return kind + ": " + std::string(part_label(best)) + " " + pct(r.parts[idx(best)].share) + " of step time";
}

// The loader that fed the optimizer when its workers spend over half their
// fetch time in storage reads; null otherwise.
const DataLoaderReport* storage_bound_workers(const RankReport& r) {
  const DataLoaderReport* l = fed_loader(r);
  return l != nullptr && l->num_workers > 0 && l->fetch_storage_share > 0.5 ? l : nullptr;
}

// The input stage, or the CPU budget they share, with the least headroom.
// The comm stage is not one: its device time summed over streams (and
// overlapped with compute) says nothing about whether collectives hold the
// trainer back — the step's comm parts do.
std::string bottleneck_of(const RankReport& r) {
  const Stage* worst = nullptr;
  for (const auto& st : r.stages)
    if (st.measured && st.demand > 0 && st.kind != StageKind::kComm &&
        (!worst || st.headroom() < worst->headroom()))
      worst = &st;
  const bool cpu = r.cpu.demand > 0 && r.cpu.capacity > 0 &&
                   (worst == nullptr || r.cpu.headroom() < worst->headroom());
  if (cpu) return r.cpu.headroom() >= 1.0 ? "trainer" : "cpu";
  if (worst == nullptr || worst->headroom() >= 1.0) return "trainer";
  // A DataLoader's workers are its preprocessing stage whatever they wait
  // on; workers over half their fetch time in reads are held by storage.
  if (worst->kind == StageKind::kPreprocess && storage_bound_workers(r) != nullptr) return "storage";
  return std::string(worst->name());
}

}  // namespace

double mean_step_ms(const RankReport& r) {
  int64_t total = 0;
  for (const auto& p : r.parts) total += p.total_ns;
  return r.steady_steps > 0 ? double(total) / 1e6 / double(r.steady_steps) : 0;
}

double mean_part_ms(const RankReport& r, Part p) {
  return r.steady_steps > 0 ? double(r.parts[idx(p)].total_ns) / 1e6 / double(r.steady_steps) : 0;
}

const DataLoaderReport* fed_loader(const RankReport& r) {
  const DataLoaderReport* best = nullptr;
  for (const auto& l : r.dataloaders)
    if (l.fed_optimizer && (best == nullptr || l.waits_in_steps > best->waits_in_steps)) best = &l;
  return best;
}

const Stage* find_stage(const RankReport& r, StageKind kind) {
  for (const auto& s : r.stages) if (s.kind == kind) return &s;
  return nullptr;
}

void build_capacity(RankReport& r, const RunStats& s, const RankTrace& t) {
  r.cpu = cpu_budget(s, t);
  const double demand = demand_per_s(r) * batches_per_step(r, s);
  // Collate and loading on the trainer thread have events of their own only
  // where the DataLoader hooks recorded them (dataloader_stages); else
  // listed, not measured.
  r.stages = {storage_stage(r, s), preprocess_stage(r, s, t), Stage{StageKind::kCollate},
              h2d_stage(r, s), Stage{StageKind::kTrainerLoad}, comm_stage(r, s),
              producer_stage(r, s)};
  dataloader_stages(r, s);
  for (auto& st : r.stages) st.demand = st.measured ? demand : 0;
  cpu_capacity(r, r.cpu, demand);
  r.bottleneck = bottleneck_of(r);
  r.cause = cause_of(r);
  char buf[224];
  std::snprintf(buf, sizeof buf, "; step p50 %.1f ms over %zu steady steps; bottleneck: %s",
                r.step_p50_ms, r.steady_steps, r.bottleneck.c_str());
  r.summary = r.cause + buf;
  if (const DataLoaderReport* l = storage_bound_workers(r); l != nullptr && r.bottleneck == "storage") {
    std::snprintf(buf, sizeof buf, " (the DataLoader's workers, %.0f %% of their fetch time in reads)",
                  100 * l->fetch_storage_share);
    r.summary += buf;
  }
}

}  // namespace stallscope::analyzer
