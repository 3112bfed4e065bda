// The PyTorch DataLoader seen from inside (issue #23, docs/report-guide.md
// "DataLoader"): the hooks' loader_config, the trainer's data waits and
// batch hand-offs, and the sample spans of the workers (each its own
// process, its own trace file of the rank) joined per batch. It gives the
// exact split of a wait on a batch (storage / preprocessing / collate /
// waiting for a worker / hand-off / head-of-line) and, per loader, the block the
// reports print.
//
//   LoaderModel m(trace);
//   m.on_config(e) / on_sample(e) / on_read(e) / on_handoff(e) / on_wait(e)
//   m.split(piece, track, a, b, batch, cut);   // while attributing a step
//   m.on_step(start, end);                     // each finalized step
//   m.retire(before);                          // waits before `before` are counted
//   auto blocks = m.finish();
//
// Joins (contract of #23 §3): a hand-off names the worker's pid and the
// batch index; its fetch is that process's fetch span of the batch that
// ended last at or before the hand-off's receive, and its end is the put.
// With num_workers=0 the fetch spans are on the trainer thread itself.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "interval.hpp"
#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

// How one wait (or the stalled part of it) divides, ns. head_of_line: the
// batch was ready before it was asked for, and the wait was longer than one
// batch's hand-off (the trainer took the batches queued ahead of it first).
struct LoaderCut {
  int64_t storage = 0, preprocess = 0, collate = 0, worker_wait = 0, handoff = 0, head_of_line = 0;
  int64_t total() const noexcept {
    return storage + preprocess + collate + worker_wait + handoff + head_of_line;
  }
};

// A span of one dataset item (or of __getitems__'s items).
inline bool is_item(format::SamplePart p) {
  return p == format::SamplePart::kGetItem || p == format::SamplePart::kNext ||
         p == format::SamplePart::kGetItems;
}

class LoaderModel {
 public:
  explicit LoaderModel(const RankTrace& t) : trace_(t) {}
  void on_config(const Ev& e);
  void on_sample(const Ev& e);
  void on_read(const Ev& e);
  void on_handoff(const Ev& e);
  void on_wait(const Ev& e);
  // A process's "sample spans off" mark: its loaders time batches, not items.
  void on_sample_spans_off(uint32_t track) {
    if (spans_off_.size() < 4096) spans_off_.insert(pid_of(track));
  }
  // The hooks' guard-rail marks (loader_guards.cpp): "dataloader env …" and
  // "dataloader batch …" on the trainer, "dataloader worker …" in a worker.
  // False for a mark that is none of them.
  bool on_guard_mark(uint32_t track, const std::string& text);
  bool active() const noexcept { return any_; }
  // Splits the stalled intervals `piece` of the trainer's wait [a, b) on
  // `track` for batch index `batch`; false (out untouched) when no hooks'
  // record covers that wait.
  bool split(const Ivs& piece, uint32_t track, int64_t a, int64_t b, uint64_t batch,
             LoaderCut& out);
  // A finalized step: the waits inside it fed the optimizer.
  void on_step(int64_t start, int64_t end);
  // Each thread's sample and collate spans that overlap [a, b), clipped:
  // what every DataLoader worker (or the trainer, num_workers=0) was
  // busy producing, for the step timelines.
  void for_each_fetch(int64_t a, int64_t b, const std::function<void(uint32_t, int64_t, int64_t)>& fn) const;
  // Counts the waits that ended before `before` and forgets records that
  // no later wait can need.
  void retire(int64_t before);
  // cpu_of(pid): a worker process's CPU time over the run, ns (-1 unknown);
  // it gives the workers' on-CPU share of their fetches.
  using CpuOf = std::function<double(uint32_t pid)>;
  std::vector<DataLoaderReport> finish(const CpuOf& cpu_of = {});

 private:
  struct Span {
    int64_t a, b;
    uint64_t loader, batch, index;  // index: the dataset's (an item's span)
    uint32_t generation, count;
    int32_t worker;
    format::SamplePart part;
  };
  struct Handoff {
    int64_t asked, received;  // asked 0: unknown
    uint64_t loader, batch;
    uint32_t generation, pid;
    int32_t worker;
  };
  struct Wait {
    int64_t a, b;
    uint64_t batch;
    uint32_t track;
    bool in_step;        // inside a step, or just before one (it fed the optimizer)
    int64_t in_step_ns;  // of it, inside steps
  };
  struct Lane {  // one thread: its spans and reads, in arrival (≈ end) order
    std::deque<Span> spans;
    std::deque<Iv> reads;
    std::deque<uint32_t> read_files;  // beside reads: each read's file id (0 unknown)
    int64_t max_read = 0;  // longest read (queue wait included)
    int64_t max_fetch = 0;  // longest fetch span
    // The first span ending at or after t (spans arrive as they end).
    size_t span_from(int64_t t) const {
      return static_cast<size_t>(
          std::lower_bound(spans.begin(), spans.end(), t,
                           [](const Span& x, int64_t v) { return x.b < v; }) -
          spans.begin());
    }
  };
  struct Fetch {  // a fetch span found by a join
    uint32_t track;
    const Span* span;
  };
  struct WorkerAcc {  // one worker process's fetches
    double batches = 0, fetch_ns = 0, item_ns = 0, samples = 0, collate_ns = 0, collates = 0;
  };
  struct Item {  // one timed sample of a batch the trainer waited for
    float ms;
    float wait_ms;  // the trainer's wait for its batch, the part inside steps
    uint32_t file;  // the longest read inside it (0 none)
    uint64_t index, batch, wait;  // wait: which wait (its ordinal in the loader)
  };
  struct PidFetches {  // all fetches of one worker process, waited for or not
    double fetches = 0, fetch_ns = 0, storage_ns = 0;
    bool trainer = false;  // the trainer's own fetches (num_workers=0)
  };
  struct Acc {  // per loader, over the retired waits and batches
    DataLoaderReport rep;
    std::vector<Item> items;  // at most kMaxItems
    std::map<std::pair<int32_t, uint32_t>, WorkerAcc> workers;  // by (worker, pid)
    double handoff_ns = 0;      // put to receive, less the worker's next fetches
    double handoff_raw_ns = 0;  // put to receive: how long a batch takes to arrive
    uint64_t handoffs_timed = 0;
    double in_step_wait_ns = 0;
    std::map<uint32_t, int64_t> gen_start;  // generation -> iterator creation
    std::map<uint32_t, LoaderEpoch> epochs;
    uint64_t order = 0;  // first seen
  };

  const Handoff* handoff_for(uint32_t track, int64_t a, int64_t b, uint64_t batch) const;
  bool fetch_for(const Handoff& h, Fetch& out) const;
  const Span* trainer_fetch(uint32_t track, int64_t a, int64_t b) const;
  void cut_fetch(const Ivs& q, uint32_t track, const Span& f, LoaderCut& out) const;
  void cut_before(const Ivs& q, uint32_t track, const Span& f, LoaderCut& out) const;
  // After its put, a batch may wait for its worker while that worker runs
  // its next fetch (a multiprocessing queue's feeder thread and torch's
  // resource sharer need the worker's GIL): when that fetch ended before
  // the batch was received, the batch came through only once the fetch let
  // go. The part of `q` such fetches cover, split like them and taken out
  // of `q`; a fetch still running at the receive held nothing back.
  void cut_after(Ivs& q, uint32_t track, int64_t put, LoaderCut& out) const;
  // How much of [put, received) the worker spent in its next fetches.
  int64_t busy_after(uint32_t track, int64_t put, int64_t received) const;
  void count_wait(const Wait& w);
  void count_fetch(Acc& acc, uint32_t track, const Span& f, uint32_t pid, double wait_ms);
  // Reads of `l` inside [a, b): their length, ns; `longest` the file of
  // the longest one (0 none).
  int64_t reads_in(const Lane& l, int64_t a, int64_t b, uint32_t* longest = nullptr) const;
  void slow_samples(const Acc& a, DataLoaderReport& r) const;
  void fetch_shares(const Acc& a, const CpuOf& cpu_of, DataLoaderReport& r) const;
  void head_of_line(Acc& acc, const Wait& w, const Handoff& h);
  // Mean put -> received of the loader's batches put while awaited, so far (-1 none).
  int64_t typical_handoff(uint64_t loader) const;
  void evict(int64_t before);
  Acc* acc(uint64_t loader);  // nullptr past kMaxLoaders
  // Bounds on what a damaged trace can make the model hold.
  static constexpr size_t kMaxLoaders = 256, kMaxGenerations = 4096, kMaxItems = 1 << 17;
  uint32_t pid_of(uint32_t track) const;
  // Fills a loader's guard-rail facts from the marks (loader_guards.cpp).
  void guard_facts(DataLoaderReport& r) const;
  struct Guard {  // per loader id
    double shm_free = -1, shm_total = -1, nofile = -1, fds = -1, batch_bytes = -1, tensors = -1;
    std::string sharing;
  };
  struct Threads {  // per worker pid
    double os = -1, torch = -1, fresh = -1;  // fresh: threads beyond those at its start
  };
  std::map<uint64_t, Guard> guards_;
  std::map<uint32_t, Threads> worker_threads_;

  const RankTrace& trace_;
  bool any_ = false;
  std::set<uint32_t> spans_off_;                      // pids
  std::map<uint32_t, Lane> lanes_;                    // by track
  std::map<uint32_t, std::deque<Handoff>> handoffs_;  // by trainer track, by receive
  std::map<std::pair<uint32_t, uint64_t>, std::vector<std::pair<uint32_t, int64_t>>> fetches_;
  // (pid, batch) -> (track, end) of its fetch spans
  std::deque<Wait> waits_;  // by end
  std::map<uint64_t, Acc> acc_;
  std::map<uint64_t, LoaderConfig> configs_;  // latest per loader
  std::map<std::pair<uint64_t, uint32_t>, PidFetches> pid_fetches_;  // by (loader, pid)
  uint64_t next_order_ = 0;
  Ivs q_, r_, c_, x_, y_;  // scratch
  int64_t steps_ns_ = 0;
};

// "set applied KEY=VALUE at SITE (was OLD)" and the other forms of the
// contract of #23 §2; false for a mark that is no such line.
bool parse_setting_mark(const std::string& text, SettingMark& out);

}  // namespace stallscope::analyzer
