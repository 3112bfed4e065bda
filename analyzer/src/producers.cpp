#include "producers.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace stallscope::analyzer {

namespace {

using format::ChannelType;

const char* type_name(ChannelType t) {
  switch (t) {
    case ChannelType::kPipe: return "pipe";
    case ChannelType::kMpQueue: return "multiprocessing queue";
    case ChannelType::kSocket: return "socketpair";
    case ChannelType::kUser: return "queue";
    case ChannelType::kEventfd: return "eventfd";
    case ChannelType::kCondVar: return "condition variable";
    case ChannelType::kSemaphore: return "semaphore";
    default: return "channel";
  }
}

// The channel types of a set of bits, in enum order ("pipe, semaphore").
std::string types_text(uint32_t bits) {
  std::string out;
  for (uint32_t t = 0; t < 32; ++t) {
    if ((bits >> t & 1) == 0) continue;
    if (!out.empty()) out += ", ";
    out += type_name(static_cast<ChannelType>(t));
  }
  return out.empty() ? "channel" : out;
}

constexpr int64_t kWaitedNs = 50'000;
constexpr double kStarvedWaits = 0.8, kStarvedShare = 0.25;

uint32_t pid_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
uint32_t tid_of(uint64_t key) { return static_cast<uint32_t>(key); }

}  // namespace

uint64_t ProducerModel::track_key(uint32_t track) const {
  if (track >= trace_.tracks.size()) return 0;
  const TrackDesc& td = trace_.tracks[track];
  return key(td.proc < trace_.procs.size() ? trace_.procs[td.proc].pid : 0, td.tid);
}

std::string ProducerModel::thread_name(uint32_t pid, uint32_t tid) const {
  char buf[64];
  if (tid == 0) {
    std::snprintf(buf, sizeof buf, "process %u", pid);
    return buf;
  }
  for (const TrackDesc& td : trace_.tracks) {
    if (td.type != TrackType::kThread || td.tid != tid) continue;
    if (td.proc < trace_.procs.size() && trace_.procs[td.proc].pid != pid) continue;
    if (!td.name.empty()) {
      std::snprintf(buf, sizeof buf, "thread %u", tid);
      return std::string(buf) + " (" + td.name + ")";
    }
  }
  std::snprintf(buf, sizeof buf, "thread %u", tid);
  return buf;
}

bool ProducerModel::on_handoff(const Ev& e) {
  const ChannelHandoff& h = e.channel();
  const uint64_t producer = key(h.producer_pid, h.producer_tid);
  const uint64_t consumer = track_key(e.track);
  if (producer == consumer) return false;  // a thread waking itself
  // Condition variables only: they live as long as their queue. A
  // semaphore is often one lock per wait (Python's Condition.wait), its
  // address soon reused by another lock; the shim, which sees sem_init and
  // sem_destroy, already left out the ones two threads hand both ways.
  if (h.type == ChannelType::kCondVar) {
    if (symmetric_.count(h.channel) != 0) return false;
    auto it = object_first_.find(h.channel);
    if (it == object_first_.end()) {
      if (object_first_.size() < kMaxKeys) object_first_.emplace(h.channel, std::pair{producer, consumer});
    } else if (it->second.first == consumer && it->second.second == producer) {
      // Handed both ways: a lock, not data (its first record stays counted).
      symmetric_.emplace(h.channel, true);
      return false;
    }
  }
  auto it = pairs_.find({producer, consumer});
  if (it == pairs_.end()) {
    if (pairs_.size() >= kMaxKeys) return true;
    it = pairs_.emplace(std::pair{producer, consumer}, Agg{}).first;
  }
  Agg& a = it->second;
  ++a.count;
  a.bytes += h.bytes;
  const int64_t asked = h.asked_ns > 0 && h.asked_ns <= e.end ? h.asked_ns : e.end;
  a.wait_ns += e.end - asked;
  if (e.end - asked > kWaitedNs) ++a.waited;
  a.first_put = std::min(a.first_put, e.start);
  a.last_put = std::max(a.last_put, e.start);
  a.types |= 1u << (static_cast<uint32_t>(h.type) & 31);
  return true;
}

std::map<uint64_t, int64_t> ProducerModel::storage_ns() const {
  std::map<uint64_t, int64_t> out;
  if (storage_unknown_ != 0) out[0] += storage_unknown_;
  for (size_t t = 0; t < storage_by_track_.size(); ++t)
    if (storage_by_track_[t] != 0) out[track_key(static_cast<uint32_t>(t))] += storage_by_track_[t];
  return out;
}

namespace {

// The trainer's hand-offs: how many waited, their bytes and wait.
struct HandoffTotals {
  uint64_t waited = 0, bytes = 0;
  int64_t wait_ns = 0;
};

// The figures per item and per hand-off, from the producers' CPU, storage
// and the time between their items (FeedReport).
void per_item_figures(FeedReport& f, const HandoffTotals& t, size_t steps, double data_share) {
  if (steps > 0) f.items_per_step = double(f.items) / double(steps);
  if (f.handoffs > 0) {
    f.waited_share = double(t.waited) / double(f.handoffs);
    f.bytes_per_item = double(t.bytes) / double(f.handoffs);
    f.wait_ms_per_handoff = double(t.wait_ns) / 1e6 / double(f.handoffs);
  }
  if (f.items > 0) {
    double cpu = 0, storage_ms = 0;
    bool cpu_known = true;
    for (const Producer& p : f.producers) {
      cpu_known = cpu_known && p.cpu_ms >= 0;
      cpu += std::max(p.cpu_ms, 0.0);
      storage_ms += p.storage_ms;
    }
    f.storage_ms_per_item = storage_ms / double(f.items);
    if (cpu_known) {
      f.cpu_ms_per_item = cpu / double(f.items);
      f.busy_ms_per_item = f.cpu_ms_per_item + f.storage_ms_per_item;
    }
    // A starved trainer (it waited for most objects, or a quarter of its
    // time): every producer was busy all along, so the time between its
    // items is its time per item — on CPU, in storage reads, or blocked
    // elsewhere (a network call, a sleep, a lock) that neither the sampler
    // nor the reads see.
    double interval = 0, weight = 0;
    for (const Producer& p : f.producers) {
      if (p.interval_ms <= 0) continue;
      interval += p.interval_ms * double(p.items);
      weight += double(p.items);
    }
    if (weight > 0) f.interval_ms_per_item = interval / weight;
    const bool starved = f.waited_share >= kStarvedWaits || data_share >= kStarvedShare;
    if (starved && f.interval_ms_per_item > 0) {
      const double seen = std::max(f.busy_ms_per_item, 0.0);
      if (f.interval_ms_per_item > seen) {
        f.other_ms_per_item = f.interval_ms_per_item - seen;
        f.busy_ms_per_item = f.interval_ms_per_item;
      }
    }
  }
}

// "2 processes -> multiprocessing queue -> thread 12 (…) -> semaphore -> trainer"
std::string feed_path(const FeedReport& f, uint32_t upstream_types) {
  size_t procs = 0, threads = 0;
  for (const Producer& p : f.producers) (p.tid == 0 ? procs : threads) += 1;
  char buf[96];
  std::string who;
  if (procs > 0) {
    std::snprintf(buf, sizeof buf, "%zu process%s", procs, procs == 1 ? "" : "es");
    who = buf;
  }
  if (threads > 0) {
    std::snprintf(buf, sizeof buf, "%s%zu thread%s", who.empty() ? "" : " and ", threads,
                  threads == 1 ? "" : "s");
    who += buf;
  }
  std::string path = who.empty() ? "writers not seen" : who;
  if (!f.relays.empty()) {
    path += " -> " + types_text(upstream_types) + " -> ";
    for (size_t i = 0; i < f.relays.size(); ++i) path += (i ? ", " : "") + f.relays[i].name;
  }
  path += " -> " + f.channel + " -> trainer";
  return path;
}

}  // namespace

// Each producer's and relay's name, CPU and storage time.
void ProducerModel::describe(FeedReport& f, const CpuOf& cpu_of) const {
  const std::map<uint64_t, int64_t> storage = storage_ns();
  for (auto* v : {&f.producers, &f.relays}) {
    for (Producer& p : *v) {
      p.name = thread_name(p.pid, p.tid);
      const double ns = cpu_of(p.pid, p.tid);
      p.cpu_ms = ns >= 0 ? ns / 1e6 : -1;
      for (const auto& [k, s] : storage)
        if (pid_of(k) == p.pid && (p.tid == 0 || tid_of(k) == p.tid)) p.storage_ms += double(s) / 1e6;
    }
  }
}

FeedReport ProducerModel::finish(uint32_t trainer_track, size_t steps, double data_share,
                                 const CpuOf& cpu_of) const {
  FeedReport f;
  const uint64_t trainer = track_key(trainer_track);
  const uint32_t trainer_pid = pid_of(trainer);
  // Who handed to `consumer`, and how much.
  auto into = [&](uint64_t consumer) {
    std::vector<std::pair<uint64_t, const Agg*>> v;
    for (const auto& [pc, a] : pairs_)
      if (pc.second == consumer) v.push_back({pc.first, &a});
    return v;
  };
  const auto direct = into(trainer);
  if (direct.empty()) return f;
  f.found = true;
  uint32_t trainer_types = 0, upstream_types = 0;
  uint64_t bytes = 0;
  int64_t wait_ns = 0;
  // Producers keyed by process when they live in another one (a forked
  // worker's feeder thread writes for the whole process).
  std::map<uint64_t, Producer> producers;
  std::map<uint64_t, std::pair<int64_t, int64_t>> spans;  // first and last put
  auto add_producer = [&](uint64_t k, const Agg& a) {
    const uint32_t pid = pid_of(k);
    const uint64_t pk = pid != trainer_pid ? key(pid, 0) : k;
    Producer& p = producers[pk];
    p.pid = pid;
    p.tid = tid_of(pk);
    p.items += a.count;
    auto [it, fresh] = spans.try_emplace(pk, a.first_put, a.last_put);
    if (!fresh) {
      it->second.first = std::min(it->second.first, a.first_put);
      it->second.second = std::max(it->second.second, a.last_put);
    }
  };
  uint64_t waited = 0;
  for (const auto& [prod, a] : direct) {
    f.handoffs += a->count;
    waited += a->waited;
    bytes += a->bytes;
    wait_ns += a->wait_ns;
    trainer_types |= a->types;
    // A relay: a thread that gets what it hands on from others.
    std::vector<std::pair<uint64_t, const Agg*>> up;
    for (const auto& x : into(prod))
      if (x.first != trainer) up.push_back(x);
    if (!up.empty() && pid_of(prod) == trainer_pid) {
      Producer r;
      r.pid = pid_of(prod);
      r.tid = tid_of(prod);
      r.items = a->count;
      f.relays.push_back(r);
      for (const auto& [u, ua] : up) {
        if (u == 0) continue;
        add_producer(u, *ua);
        upstream_types |= ua->types;
      }
    } else if (prod != 0) {  // a writer the shim did not see: no producer to name
      add_producer(prod, *a);
    }
  }
  for (auto& [k, p] : producers) {
    const auto& [first, last] = spans[k];
    if (p.items >= 2 && last > first) p.interval_ms = double(last - first) / 1e6 / double(p.items - 1);
    f.producers.push_back(p);
  }
  describe(f, cpu_of);
  f.channel = types_text(trainer_types);
  for (const Producer& p : f.producers) f.items += p.items;
  per_item_figures(f, {waited, bytes, wait_ns}, steps, data_share);
  f.path = feed_path(f, upstream_types);
  return f;
}

}  // namespace stallscope::analyzer
