// Routing of incoming events into the engine's channels, series, lineage
// and totals; the choice of step source; trimming of what steps no longer need.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine.hpp"
#include "stallscope/nccl_bus.hpp"

namespace stallscope::analyzer {

namespace {
constexpr size_t kMaxFiles = 1u << 16;
constexpr uint64_t kSmallRead = 256u << 10;

// The step pattern, compiled once per thread (compiling it costs as much as
// analyzing a small rank; every rank of a run uses the same one).
std::regex compiled_step_pattern(const std::string& pattern) {
  thread_local std::string last_pattern;
  thread_local std::regex last;
  thread_local bool have = false;
  if (!have || pattern != last_pattern) {
    try {
      last = std::regex(pattern,
                        std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
    } catch (const std::regex_error& e) {
      have = false;
      throw AnalyzeError("--step-pattern '" + pattern + "': " + e.what());
    }
    last_pattern = pattern;
    have = true;
  }
  return last;
}
}  // namespace

RankEngine::RankEngine(const RankTrace& trace, const AnalyzeOptions& opt)
    : trace_(trace),
      opt_(opt),
      re_(compiled_step_pattern(opt.step_pattern)),
      finder_(trace_, re_),
      name_flags_(trace_.names, re_),
      gap_classifier_(name_flags_),
      loaders_(trace),
      producers_(trace) {}

// CPU a producer used over its life: a process from its own sampler (a
// forked worker's file) or its parent's reading of it; a thread from its
// CPU clock. Cumulative clocks count from the thread's or the child's
// start, so the last reading is the whole.
double RankEngine::producer_cpu_ns(uint32_t pid, uint32_t tid) const {
  for (uint32_t p = 0; p < trace_.procs.size(); ++p) {
    if (trace_.procs[p].pid != pid) continue;
    if (tid == 0) {
      auto it = stats_.process_cpu.find(p);
      if (it != stats_.process_cpu.end() && it->second.seen) return it->second.last;
    } else {
      auto it = thread_cpu_.find({p, tid});
      if (it != thread_cpu_.end() && it->second.has_samples()) return it->second.last_total();
    }
  }
  if (tid != 0) return -1;
  for (const auto& [key, c] : child_cpu_)
    if (key.second == pid && c.has_samples()) return c.last_total();
  return -1;
}

void RankEngine::on_mark(const Ev& e) {
  if (e.name == 0 || e.name >= trace_.names.size()) return;
  const std::string& text = trace_.names[e.name];
  SettingMark m;
  if (parse_setting_mark(text, m)) {
    if (settings_.size() < 1000) settings_.push_back(std::move(m));
  } else if (loaders_.on_guard_mark(e.track, text)) {
    // a DataLoader's guard-rail facts (loader_guards.cpp)
  } else if (text.rfind("headspace replay ", 0) == 0) {  // --headspace (_headspace.py)
    on_headspace_mark(e.start, text);
  } else if (text.rfind("sample spans off", 0) == 0) {
    loaders_.on_sample_spans_off(e.track);
  } else if (text.rfind("native stacks: ", 0) == 0 ||  // the shim's sampler refused or off
             ((text.rfind("exec of ", 0) == 0 || text.rfind("spawn of ", 0) == 0) &&
              text.find(": cannot be traced (") != std::string::npos)) {  // an untraced child
    if (std::find(warnings_.begin(), warnings_.end(), text) == warnings_.end()) warn(text);
  }
}

// "headspace replay loader=ID batches=N bytes=B[ capped=1]": one per loader.
void RankEngine::on_headspace_mark(int64_t at, const std::string& text) {
  auto field = [&](std::string_view key) -> uint64_t {
    std::string k(1, ' ');  // (appended, not `" " + …`: gcc 12's -Wrestrict false positive)
    k.append(key).push_back('=');
    const size_t p = text.find(k);
    if (p == std::string::npos) return 0;
    return std::strtoull(text.c_str() + p + k.size(), nullptr, 10);
  };
  Headspace& h = headspace_;
  if (!h.replayed || at < h.replay_start_ns) h.replay_start_ns = at;
  h.replayed = true;
  h.batches = std::max(h.batches, field("batches"));
  h.bytes += field("bytes");
  h.capped = h.capped || field("capped") != 0;
}

// `phase:eval` ranges (the hooks' evaluation loops): phases, not steps.
void RankEngine::add_phase(uint32_t name, int64_t a, int64_t b) {
  const std::string& n = trace_.names[name];
  if (n.rfind("phase:", 0) != 0) return;
  if (phases_.size() >= 64 && !phases_.contains(n.substr(6))) return;
  PhaseStat& p = phases_[n.substr(6)];
  p.name = n.substr(6);
  ++p.count;
  p.total_ms += double(b - a) / 1e6;
}

void RankEngine::on_phase(const Ev& e) {
  if (e.name >= trace_.names.size()) return;
  if (e.phase == format::kComplete) {
    add_phase(e.name, e.start, e.end);
  } else if (e.phase == format::kBegin) {
    auto& st = open_phases_[e.track];
    if (st.size() < 64) st.push_back({e.name, e.start});
  } else if (e.phase == format::kEnd) {
    auto& st = open_phases_[e.track];
    if (st.empty()) return;
    add_phase(st.back().first, st.back().second, e.start);
    st.pop_back();
  }
}

// The hooks close an evaluation phase when training resumes; the one after
// the last epoch stays open to the end of the trace.
void RankEngine::close_open_phases() {
  for (auto& [track, st] : open_phases_) {
    for (const auto& [name, start] : st)
      if (stats_.last_ns > start) add_phase(name, start, stats_.last_ns);
    st.clear();
  }
}

void RankEngine::route_device(const Ev& e) {
  if (e.phase != format::kComplete) return;
  if (e.kind == Kind::kCollective && e.coll().enqueued && !e.emulated) {
    route_enqueue(e);
    return;
  }
  device_seen_ = true;
  switch (e.kind) {
    case Kind::kKernel:
      compute_.add(e.start, e.end);
      streams_[0].add(e.track, e.start, e.end);
      ++stats_.kernels;
      break;
    case Kind::kCollective:
      comm_.add(e.start, e.end);
      streams_[1].add(e.track, e.start, e.end);
      // An NCCL kernel from CUPTI knows no communicator: its call tells.
      if (e.coll().comm == 0 && e.coll().seq == 0 && !e.emulated &&
          trace_.tracks[e.track].type == TrackType::kGpuStream)
        route_nccl_kernel(e);
      else if (trace_.tracks[e.track].type == TrackType::kGpuStream) add_device_collective(e);
      else collectives_.add(e, trace_.tracks[e.track].type);
      break;
    case Kind::kH2D: {
      h2d_.add(e.start, e.end);
      streams_[2].add(e.track, e.start, e.end);
      const int pinned = e.copy().src == format::MemKind::kPinned ? 1 : 0;
      stats_.h2d_bytes[pinned] += e.copy().bytes;
      stats_.h2d_ns[pinned] += e.dur();
      break;
    }
    case Kind::kD2H:
      other_.add(e.start, e.end);
      d2h_.add(e.start, e.end);
      streams_[3].add(e.track, e.start, e.end);
      break;
    default:
      other_.add(e.start, e.end);
      streams_[3].add(e.track, e.start, e.end);
      break;
  }
}

RankEngine::TrainerChans* RankEngine::trainer_chans() {
  if (!finder_.decided()) return nullptr;
  auto it = chans_.find(finder_.trainer_track());
  return it == chans_.end() ? nullptr : &it->second;
}

// A collective's host-side call (an NCCL call returning once the work is
// enqueued): the calling thread's host time, like a kernel launch. The
// transfer is the device's (an NCCL kernel), or not recorded at all.
void RankEngine::route_enqueue(const Ev& e) {
  ++cuda_api_;  // a GPU job: without device activity, it was not recorded
  nccl_join_.add_call(e);
  add_joined_kernels();
  if (finder_.decided() && e.track != finder_.trainer_track()) return;
  chans_[e.track].api.add(e.start, e.end);
}

void RankEngine::route_nccl_kernel(Ev e) {
  if (nccl_join_.join(e)) add_device_collective(e);
}

// NCCL kernels that were waiting for their launch, joined when it came.
void RankEngine::add_joined_kernels() {
  if (nccl_join_.joined().empty()) return;
  for (const Ev& k : nccl_join_.joined()) add_device_collective(k);
  nccl_join_.joined().clear();
}

// A device-side collective with its call's identity: an instance for the
// cross-rank pass, and its bus bandwidth.
void RankEngine::add_device_collective(const Ev& e) {
  collectives_.add(e, TrackType::kGpuStream);
  const Collective& c = e.coll();
  const auto op = c.op;
  if (c.bytes == 0 || c.nranks < 2 || e.dur() <= 0) return;  // one rank: nothing crosses a link
  // A damaged size or rank count is no transfer: no bandwidth.
  if (c.bytes > nccl::kMaxCallBytes || c.nranks > (1u << 20)) return;
  const std::pair<uint8_t, uint32_t> key{static_cast<uint8_t>(op), c.nranks};
  if (stats_.coll_bw.size() >= RunStats::kMaxCollKeys && !stats_.coll_bw.contains(key)) return;
  CollBandwidth& b = stats_.coll_bw[key];
  const double bus = double(nccl::data_size(op, c.bytes, c.nranks)) * nccl::bus_factor(op, c.nranks);
  ++b.kernels;
  b.bus_bytes += bus;
  b.ns += e.dur();
  if (c.bytes >= kLargeCollective) {
    ++b.large;
    b.large_bus_bytes += bus;
    b.large_ns += e.dur();
    stats_.large_bus_bw.add(static_cast<float>(bus / (double(e.dur()) / 1e9)));
  }
}

void RankEngine::route_trainer(const Ev& e) {
  if (e.phase != format::kComplete) return;
  add_joined_kernels();  // kernels whose launch came just now
  if (e.kind == Kind::kApiCall) ++cuda_api_;
  if (finder_.decided() && e.track != finder_.trainer_track()) return;
  TrainerChans& c = chans_[e.track];
  switch (e.kind) {
    case Kind::kDataWait:
      c.waits.add(e.start, e.end);
      if (!c.recs.empty() && e.end < c.recs.back().b) c.recs_by_end = false;
      c.max_wait = std::max(c.max_wait, e.end - e.start);
      c.recs.push_back({e.start, e.end, e.work().batch != 0 ? e.work().batch : e.corr});
      break;
    case Kind::kApiCall:
      c.api.add(e.start, e.end);
      c.acts.add(e.start, e.end, e.name, ActivityKind::kApiCall);
      ++stats_.launches;
      break;
    default:
      c.sync.add(e.start, e.end);
      c.acts.add(e.start, e.end, e.name, ActivityKind::kSync);
      break;
  }
}

// A user or NVTX range on the trainer: what the host was doing in its gaps.
void RankEngine::route_activity(const Ev& e) {
  if (e.phase != format::kComplete || e.end <= e.start) return;
  if (finder_.decided() && e.track != finder_.trainer_track()) return;
  chans_[e.track].acts.add(e.start, e.end, e.name, ActivityKind::kAnnotation);
}

// A stack sample stands for its interval around the moment it was taken.
void RankEngine::route_sample(const Ev& e) {
  const StackSample& st = e.stack();
  if (st.interval_ns == 0 || e.track >= trace_.tracks.size()) return;
  const uint32_t proc = trace_.tracks[e.track].proc;
  const uint32_t tid = st.tid != 0 ? st.tid : trace_.tracks[e.track].tid;
  if (finder_.decided() && (proc != trainer_proc_ || tid != trainer_tid_)) return;
  const auto half = static_cast<int64_t>(std::min<uint64_t>(st.interval_ns, uint64_t{1} << 40) / 2);
  samples_[{proc, tid}].add(e.start - half, e.start + half, e.name, ActivityKind::kStackSample);
}

void RankEngine::route_data(const Ev& e, std::span<const uint64_t> ids) {
  if (e.kind == Kind::kBatchReady) {
    lineage_.add_batch(e.work().batch != 0 ? e.work().batch : e.corr, e.start, ids);
    ++stats_.batches;
    stats_.batch_samples += ids.size();
    return;
  }
  if (e.phase != format::kComplete) return;
  if (e.kind == Kind::kStorageRead) {
    // Items of a sample's lineage also serve as the producers' busy time.
    const StorageRead& io = e.io();
    if (!lineage_.add_read(e)) reads_.add(e.track, e.start - static_cast<int64_t>(io.queued_ns), e.end);
    TierStats& t = stats_.tiers[static_cast<uint8_t>(io.tier)];
    ++t.reads;
    t.bytes += io.bytes;
    if (io.cache != format::Cache::kUnknown) {
      // A partial hit went to storage (its latency is a storage access);
      // only its bytes past the hit came from there.
      if (io.went_to_storage()) ++t.storage_reads;
      const uint64_t missed = io.miss_bytes();
      t.classified_bytes += io.bytes;
      t.miss_bytes += missed;
      t.hit_bytes += io.bytes - missed;
    }
    if (io.bytes < kSmallRead) ++t.small_reads;
    t.busy_ns += std::max<int64_t>(0, e.end - std::max(e.start, t.cover_end));
    t.cover_end = std::max(t.cover_end, e.end);
    if (io.cache_method == format::CacheMethod::kFault) ++stats_.fault_reads;
    if (io.queue_depth > 0) {  // 0: the reader did not record one (not stallscope's loader)
      stats_.qd_sum += io.queue_depth;
      ++stats_.qd_reads;
    }
    // Reads come in runs from the same file: the set is only consulted on a change.
    if (io.file != last_file_ && stats_.files.size() < kMaxFiles) stats_.files.insert(io.file);
    last_file_ = io.file;
    return;
  }
  if (!lineage_.add_preprocess(e)) pre_.add(e.track, e.start, e.end);
  ++stats_.pre_items;
  stats_.pre_samples += std::max<uint32_t>(e.work().count, 1);
  stats_.pre_busy_ns += e.dur();
  const std::pair<uint32_t, uint32_t> worker{e.track, e.work().worker};
  if (worker != last_worker_ && stats_.workers.size() < 4096) stats_.workers.insert(worker);
  last_worker_ = worker;
}

RankEngine::CounterKind RankEngine::counter_kind(uint32_t name) {
  if (name >= counter_kinds_.size()) counter_kinds_.resize(name + 1, CounterKind::kUnknown);
  CounterKind& k = counter_kinds_[name];
  if (k != CounterKind::kUnknown) return k;
  const std::string& n = trace_.names[name];
  k = n == "cpu.thread_ns"         ? CounterKind::kThreadNs
      : n == "cpu.child_ns"        ? CounterKind::kChildNs
      : n == "cpu.process_ns"      ? CounterKind::kProcessNs
      : n == "cpu.idle"            ? CounterKind::kIdle
      : n == "cgroup.nr_throttled" ? CounterKind::kThrottledPeriods
      : n == "cgroup.throttled_ns" ? CounterKind::kThrottledNs
      : n == "faults.major"        ? CounterKind::kMajorFaults
      : n == "sampler.period_ms"   ? CounterKind::kSamplePeriod
                                   : CounterKind::kOther;
  return k;
}

void RankEngine::on_counter(const Ev& e) {
  const uint32_t proc = trace_.tracks[e.track].proc;
  switch (counter_kind(e.name)) {
    case CounterKind::kThreadNs:
      thread_cpu_[{proc, e.corr}].add_cumulative(e.start, e.value(), period_of(proc));
      break;
    case CounterKind::kChildNs:
      child_cpu_[{proc, e.corr}].add_cumulative(e.start, e.value(), period_of(proc));
      stats_.child_cpu[{proc, e.corr}].add(e.value(), e.start);
      break;
    case CounterKind::kProcessNs: stats_.process_cpu[proc].add(e.value(), e.start); break;
    case CounterKind::kIdle:
      if (stats_.idle_proc < 0) stats_.idle_proc = proc;
      if (stats_.idle_proc == proc) stats_.idle.add_level(e.start, e.value());
      break;
    case CounterKind::kThrottledPeriods: stats_.throttled_periods[proc].add(e.value(), e.start); break;
    case CounterKind::kThrottledNs: stats_.throttled_ns[proc].add(e.value(), e.start); break;
    case CounterKind::kMajorFaults: stats_.major_faults[{proc, e.corr}].add(e.value(), e.start); break;
    case CounterKind::kSamplePeriod:
      if (e.value() >= 1 && e.value() <= 60000) {
        if (proc_period_ns_.size() <= proc) proc_period_ns_.resize(proc + 1, 0);
        proc_period_ns_[proc] = static_cast<int64_t>(e.value() * 1e6);
      }
      break;
    default: break;
  }
}

void RankEngine::on_decided() {
  const uint32_t t = finder_.trainer_track();
  std::erase_if(chans_, [t](const auto& kv) { return kv.first != t; });
  trainer_proc_ = trace_.tracks[t].proc;
  trainer_tid_ = trace_.tracks[t].tid;
  const std::pair<uint32_t, uint32_t> key{trainer_proc_, trainer_tid_};
  std::erase_if(samples_, [&key](const auto& kv) { return kv.first != key; });
}

void RankEngine::advance(int64_t safe_ns) {
  if (safe_ns <= INT64_MIN + opt_.lineage_horizon_ns) return;  // nothing is safe yet
  if (!finder_.decided()) {
    // Nothing is trimmed before the first try at choosing the step source
    // (at most decide_events events are held): the first steps of a sparse
    // run would lose their device and trainer intervals. After a try found
    // no step at all, keep only a horizon of history.
    if (safe_ns != INT64_MAX && events_ >= opt_.decide_events)
      trim(safe_ns - opt_.lineage_horizon_ns);
    return;
  }
  // Steps are attributed in batches: sorting the window once per batch
  // instead of once per step.
  if (safe_ns != INT64_MAX && finder_.ready_count(safe_ns) < kBatchSteps) return;
  const auto ready = finder_.pop_ready(safe_ns);
  if (ready.empty()) return;
  for (Channel* c : {&compute_, &comm_, &h2d_, &other_, &d2h_}) c->prepare();
  if (TrainerChans* tc = trainer_chans()) {
    for (Channel* c : {&tc->waits, &tc->api, &tc->sync}) c->prepare();
    tc->acts.prepare();
  }
  for (auto& [key, ch] : samples_) ch.prepare();
  for (const StepCand& c : ready) finalize(c);
  for (Channel* c : {&compute_, &comm_, &h2d_, &other_, &d2h_}) c->trim();
  reads_.drop_before(finalized_until_);
  pre_.drop_before(finalized_until_);
  for (LaneChannel& c : streams_) c.drop_before(finalized_until_);
  if (TrainerChans* tc = trainer_chans()) {
    for (Channel* c : {&tc->waits, &tc->api, &tc->sync}) c->trim();
    tc->acts.trim();
    for (auto& [key, ch] : samples_) ch.trim();
    while (!tc->recs.empty() && tc->recs.front().b <= finalized_until_) tc->recs.pop_front();
  }
  // Lineage and samples are kept for the horizon, but never for more than
  // kLineageSteps steps: memory is bounded by the window, not by the run.
  for (const StepCand& c : ready) recent_starts_.push_back(c.start);
  while (recent_starts_.size() > kLineageSteps) recent_starts_.pop_front();
  const int64_t before = std::max(ready.back().start - opt_.lineage_horizon_ns, recent_starts_.front());
  trim(before);
  loaders_.retire(before);
}

void RankEngine::trim(int64_t before) {
  lineage_.evict_before(before);
  for (auto* m : {&thread_cpu_, &child_cpu_})
    for (auto& [k, s] : *m) s.drop_before(before);
  stats_.idle.drop_before(before);
  if (finder_.decided()) return;
  for (Channel* c : {&compute_, &comm_, &h2d_, &other_, &d2h_}) c->drop_before(before);
  reads_.drop_before(before);
  pre_.drop_before(before);
  for (LaneChannel& c : streams_) c.drop_before(before);
  for (auto& [key, ch] : samples_) ch.drop_before(before);
  for (auto& [t, c] : chans_) {
    c.acts.drop_before(before);
    for (Channel* ch : {&c.waits, &c.api, &c.sync}) ch->drop_before(before);
    while (!c.recs.empty() && c.recs.front().b < before) c.recs.pop_front();
  }
}

void RankEngine::add_drops(const Drops& d) {
  drops_.buffer_dropped += d.buffer_dropped;
  drops_.disk_dropped += d.disk_dropped;
  drops_.ring_discarded += d.ring_discarded;
  drops_.files_truncated += d.files_truncated;
  drops_.files_error += d.files_error;
}

}  // namespace stallscope::analyzer
