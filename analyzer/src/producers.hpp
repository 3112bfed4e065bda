// Who feeds a trainer through channels stallscope did not build: the
// channel_handoff records of the preload shim (a multiprocessing queue's
// messages, a pipe's bursts, a condition variable or semaphore a producer
// signalled). Hand-offs are summed per (producer, consumer) pair; at the
// end the trainer's producers are found, through one relay where a thread
// forwards what others handed to it (Pool.imap's result thread), and
// described as a stage (report.hpp FeedReport).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

class ProducerModel {
 public:
  explicit ProducerModel(const RankTrace& t) : trace_(t) {}
  // A hand-off; false when it is none: an object two threads handed each
  // other in both directions (a lock both take and release, the
  // interpreter's own condition variables) — its later records are dropped.
  bool on_handoff(const Ev& e);
  // A storage read: its thread's time blocked in storage. Summed by track
  // (thread keys at the end), inline: reads are most of a data-heavy trace.
  [[gnu::always_inline]] void on_read(const Ev& e) {
    if (e.track < storage_by_track_.size()) {
      storage_by_track_[e.track] += e.dur();
    } else if (e.track < trace_.tracks.size()) {
      storage_by_track_.resize(trace_.tracks.size(), 0);
      storage_by_track_[e.track] += e.dur();
    } else {
      storage_unknown_ += e.dur();
    }
  }
  // CPU ns a producer used over the run: (pid, tid), tid 0 = the whole
  // process; negative when unknown.
  using CpuOf = std::function<double(uint32_t pid, uint32_t tid)>;
  // The feed of the thread on `trainer_track` over `steps` steps, of
  // which the trainer spent `data_share` waiting for data.
  FeedReport finish(uint32_t trainer_track, size_t steps, double data_share,
                    const CpuOf& cpu_of) const;

  static uint64_t key(uint32_t pid, uint32_t tid) { return uint64_t{pid} << 32 | tid; }

 private:
  struct Agg {
    uint64_t count = 0, bytes = 0;
    uint64_t waited = 0;  // hand-offs the consumer waited for (over 50 µs)
    int64_t wait_ns = 0;  // the consumer's time from asking to getting
    int64_t first_put = INT64_MAX, last_put = INT64_MIN;
    uint32_t types = 0;   // bits of format::ChannelType
  };
  uint64_t track_key(uint32_t track) const;
  std::string thread_name(uint32_t pid, uint32_t tid) const;

  const RankTrace& trace_;
  std::map<std::pair<uint64_t, uint64_t>, Agg> pairs_;  // (producer, consumer)
  // Condition variables: the first pair seen on each, and those seen both
  // ways.
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> object_first_;
  std::map<uint64_t, bool> symmetric_;
  // Storage ns by thread key, from the sums by track.
  std::map<uint64_t, int64_t> storage_ns() const;
  void describe(FeedReport& f, const CpuOf& cpu_of) const;
  std::vector<int64_t> storage_by_track_;  // by track
  int64_t storage_unknown_ = 0;            // reads on no known track (thread key 0)
  static constexpr size_t kMaxKeys = 1u << 16;
};

}  // namespace stallscope::analyzer
