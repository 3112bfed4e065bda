// Test helper: builds an in-memory rank (analyzer::RankTrace) event by event,
// times in milliseconds, for the analyzer's white-box tests.
//
//   RankBuilder b;
//   b.step(0, 0, 100).kernel(0, 60);
//   auto r = b.analyze();
//   BOOST_TEST(b.ms(r, Part::kCompute) == 60.0);
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "stallscope/analyzer/analyzer.hpp"

namespace stallscope::testing {

using analyzer::Ev;
using analyzer::Kind;
using analyzer::Part;

inline int64_t ms(double v) { return static_cast<int64_t>(std::llround(v * 1e6)); }

class RankBuilder {
 public:
  uint32_t trainer = 0, device = 1, process = 2;

  RankBuilder() {
    t.procs.push_back({});
    t.procs[0].pid = 100;
    t.tracks.push_back({0, format::TrackType::kThread, 100, 0, "trainer"});
    t.tracks.push_back({0, format::TrackType::kGpuStream, 7, 0, "stream 7"});
    t.tracks.push_back({0, format::TrackType::kProcess, 100, 0, "stallscope"});
  }
  // A host thread (a loader worker); returns its track.
  uint32_t thread(uint32_t tid) {
    t.tracks.push_back({0, format::TrackType::kThread, tid, 0, "worker"});
    return static_cast<uint32_t>(t.tracks.size() - 1);
  }
  RankBuilder& add(Kind k, uint32_t track, double a, double b, uint64_t corr = 0) {
    t.events.push_back(Ev::span(k, track, ms(a), ms(b)).with_corr(corr));
    return *this;
  }
  RankBuilder& step(uint64_t i, double a, double b) { return add(Kind::kStep, trainer, a, b, i); }
  RankBuilder& kernel(double a, double b) { return add(Kind::kKernel, device, a, b); }
  // A collective on the device; `corr` ties an NCCL kernel to its launch
  // (api(…, corr)) and so to its call (nccl_call).
  RankBuilder& collective(double a, double b, uint64_t corr = 0) {
    return add(Kind::kCollective, device, a, b, corr);
  }
  // The trainer's host-side NCCL call [a, b] (returns once enqueued) of
  // communicator `comm`, sequence number `seq`: `bytes` over `nranks` ranks.
  RankBuilder& nccl_call(double a, double b, uint64_t comm, uint64_t seq, uint64_t bytes,
                         uint32_t nranks, format::CollOp op = format::CollOp::kAllReduce) {
    add(Kind::kCollective, trainer, a, b);
    t.events.back().coll() = {.comm = comm, .seq = seq, .bytes = bytes, .nranks = nranks,
                              .op = op, .enqueued = true, .join_only = false};
    return *this;
  }
  RankBuilder& copy(Kind k, double a, double b, uint64_t bytes = 0, bool pinned = true) {
    add(k, device, a, b);
    t.events.back().copy().bytes = bytes;
    t.events.back().copy().src = pinned ? format::MemKind::kPinned : format::MemKind::kPageable;
    return *this;
  }
  RankBuilder& sync(double a, double b) { return add(Kind::kSync, trainer, a, b); }
  RankBuilder& api(double a, double b, uint64_t corr = 0) {
    return add(Kind::kApiCall, trainer, a, b, corr);
  }
  // A named CUDA API call or sync on the trainer ("cudaLaunchKernel").
  RankBuilder& api(const std::string& name, double a, double b) {
    add(Kind::kApiCall, trainer, a, b);
    t.events.back().name = t.name_id(name);
    return *this;
  }
  RankBuilder& sync(const std::string& name, double a, double b) {
    add(Kind::kSync, trainer, a, b);
    t.events.back().name = t.name_id(name);
    return *this;
  }
  // A Python stack sample of the trainer at `at` (innermost frame `frame`),
  // standing for `interval` ms around it; `flags` format::kStackNative for
  // the shim's perf_event_open sampler (`frame`: the leaf symbol).
  RankBuilder& stack(const std::string& frame, double at, double interval, uint8_t flags = 0) {
    Ev e = Ev::span(Kind::kStackSample, trainer, ms(at), ms(at));
    e.phase = format::kInstant;
    e.name = t.name_id(frame);
    e.stack().interval_ns = static_cast<uint64_t>(ms(interval));
    e.stack().tid = t.tracks[trainer].tid;
    e.stack().flags = flags;
    t.events.push_back(e);
    return *this;
  }
  RankBuilder& wait(double a, double b, uint64_t batch = 0) {
    add(Kind::kDataWait, trainer, a, b, batch);
    t.events.back().work().batch = batch;
    return *this;
  }
  // What else a read may record, e.g. read(w, 0, 5, 1, {.bytes = 64 << 10, .file = 3}).
  struct ReadOpts {
    double queued_ms = 0;
    uint64_t bytes = 4096;
    format::Tier tier = format::Tier::kLocal;
    uint16_t queue_depth = 0;  // reads in flight (0: not recorded, as outside stallscope's loader)
    uint64_t file = 0;         // file name id (0: the sample's own file)
  };
  RankBuilder& read(uint32_t track, double a, double b, uint64_t sample, double queued_ms = 0,
                    uint64_t bytes = 4096, format::Tier tier = format::Tier::kLocal) {
    return read(track, a, b, sample,
                ReadOpts{.queued_ms = queued_ms, .bytes = bytes, .tier = tier});
  }
  RankBuilder& read(uint32_t track, double a, double b, uint64_t sample, const ReadOpts& o) {
    add(Kind::kStorageRead, track, a, b);
    auto& io = t.events.back().io();
    io.sample = sample;
    io.queued_ns = static_cast<uint64_t>(ms(o.queued_ms));
    io.bytes = o.bytes;
    io.tier = o.tier;
    io.queue_depth = o.queue_depth;
    io.file = static_cast<uint32_t>(o.file != 0 ? o.file : sample);
    return *this;
  }
  RankBuilder& pre(uint32_t track, double a, double b, uint64_t sample, uint32_t count = 1,
                   uint32_t worker = 0) {
    add(Kind::kPreprocess, track, a, b);
    auto& w = t.events.back().work();
    w.sample = sample;
    w.count = count;
    w.worker = worker;
    return *this;
  }
  RankBuilder& ready(uint32_t track, double at, uint64_t batch, const std::vector<uint64_t>& samples) {
    t.add_batch_ready(track, ms(at), batch, samples);
    return *this;
  }
  RankBuilder& range(const std::string& name, uint32_t track, double a, double b) {
    add(Kind::kRange, track, a, b);
    t.events.back().name = t.name_id(name);
    return *this;
  }
  // Another process of the rank (a forked data worker); returns its
  // process track (for counter(…, track)).
  uint32_t proc(uint32_t pid, uint32_t ppid) {
    t.procs.push_back({});
    t.procs.back().pid = pid;
    t.procs.back().ppid = ppid;
    const auto p = static_cast<uint32_t>(t.procs.size() - 1);
    t.tracks.push_back({p, format::TrackType::kProcess, pid, 0, "stallscope"});
    return static_cast<uint32_t>(t.tracks.size() - 1);
  }
  // A sampler counter (cumulative cpu.thread_ns for tid, cpu.idle, …) at
  // time `at`, on the trainer's process track or on `track`.
  RankBuilder& counter(const std::string& name, double at, double value, uint64_t subject = 0,
                       uint32_t track = ~0u) {
    Ev e = Ev::span(Kind::kCounter, track == ~0u ? process : track, ms(at), ms(at));
    e.phase = format::kInstant;
    e.name = t.name_id(name);
    e.value() = value;
    e.corr = subject;
    t.events.push_back(e);
    return *this;
  }
  // ---- the DataLoader hooks' records (issue #23; docs/trace-format.md 1.1)
  // A forked worker process of the trainer; returns its thread's track.
  uint32_t worker_thread(uint32_t pid) {
    const uint32_t ptrack = proc(pid, t.procs[0].pid);
    t.tracks.push_back({t.tracks[ptrack].proc, format::TrackType::kThread, pid, 0, "worker"});
    return static_cast<uint32_t>(t.tracks.size() - 1);
  }
  // A loader_config on the trainer at `at`; its fields can be changed on the result.
  analyzer::LoaderConfig& loader_config(double at, uint64_t loader, uint32_t workers,
                                        const std::string& site = "train.py:42",
                                        uint32_t generation = 0) {
    Ev e = Ev::span(Kind::kLoaderConfig, trainer, ms(at), ms(at)).with_corr(loader);
    e.phase = format::kInstant;
    e.name = t.name_id("MapDataset");
    analyzer::LoaderConfig& c = e.loader();
    c.loader = loader;
    c.generation = generation;
    c.num_workers = static_cast<uint16_t>(workers);
    c.prefetch_factor = workers > 0 ? 2 : 0;
    c.batch_size = 8;
    c.site = t.name_id(site);
    c.sampler = t.name_id("RandomSampler");
    c.collate = t.name_id("default_collate");
    c.dataset_kind = format::DatasetKind::kMapStyle;
    c.mp_context = workers > 0 ? format::MpContext::kFork : format::MpContext::kUnknown;
    c.in_order = true;
    t.events.push_back(e);
    return t.events.back().loader();
  }
  // A sample span (fetch, __getitem__, collate …) on `track`.
  RankBuilder& sample(uint32_t track, double a, double b, format::SamplePart part, uint64_t batch,
                      uint64_t loader = 0, int32_t worker = 0, uint32_t count = 1) {
    add(Kind::kSample, track, a, b, batch);
    t.events.back().sample() = {.loader = loader, .batch = batch, .index = batch * 100,
                                .generation = 0, .worker = worker, .count = count, .part = part};
    return *this;
  }
  // The trainer received `batch` of `loader` from worker `pid` at `received`,
  // having asked for it at `asked` (the hooks write put = received).
  RankBuilder& handoff(double asked, double received, uint64_t loader, uint64_t batch, uint32_t pid,
                       int32_t worker = 0, uint32_t generation = 0) {
    add(Kind::kBatchHandoff, trainer, received, received, batch);
    t.events.back().handoff() = {.loader = loader, .batch = batch, .asked_ns = ms(asked),
                                 .generation = generation, .worker = worker, .worker_pid = pid};
    return *this;
  }
  RankBuilder& mark(const std::string& text, double at) { return mark_on(trainer, text, at); }
  RankBuilder& mark_on(uint32_t track, const std::string& text, double at) {
    Ev e = Ev::span(Kind::kMark, track, ms(at), ms(at));
    e.phase = format::kInstant;
    e.name = t.name_id(text);
    t.events.push_back(e);
    return *this;
  }

  // A channel_handoff on `track` (the consumer): put at `put`, got at
  // `got`, asked for at `asked` (< 0: = got), from thread `ptid` of
  // process `ppid` (the preload shim's records, docs/attach-preload.md).
  struct HandoffOpts {
    format::ChannelType type = format::ChannelType::kMpQueue;
    uint64_t channel = 1;
    uint64_t bytes = 4096;
  };
  RankBuilder& channel_handoff(uint32_t track, double put, double got, double asked, uint32_t ppid,
                       uint32_t ptid, const HandoffOpts& o) {
    add(Kind::kChannelHandoff, track, put, got);
    auto& h = t.events.back().channel();
    h = {};
    h.channel = o.channel;
    h.bytes = o.bytes;
    h.asked_ns = asked < 0 ? ms(got) : ms(asked);
    h.producer_pid = ppid;
    h.producer_tid = ptid;
    h.parts = 1;
    h.type = o.type;
    return *this;
  }
  RankBuilder& channel_handoff(uint32_t track, double put, double got, double asked, uint32_t ppid,
                       uint32_t ptid) {
    return channel_handoff(track, put, got, asked, ppid, ptid, HandoffOpts{});
  }

  analyzer::RankReport analyze(analyzer::AnalyzeOptions o = {}) const { return analyzer::analyze_rank(t, o); }

  analyzer::RankTrace t;
};

// Part of step i in ms.
inline double part_ms(const analyzer::RankReport& r, size_t step, Part p) {
  return static_cast<double>(r.steps.at(step).parts[analyzer::idx(p)]) / 1e6;
}

}  // namespace stallscope::testing
