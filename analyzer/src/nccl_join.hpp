// Gives an NCCL kernel recorded by CUPTI the identity of the NCCL call that
// launched it. CUPTI's kernel record knows only the device time and the op
// (from the kernel's name); the call (NCCL profiler plugin or the preload
// shim) knows communicator, sequence number, bytes and rank count. They are
// joined through the launch: the kernel's correlation id is that of the
// CUDA launch call, and that launch call runs inside the NCCL call's
// host-side span on the same thread.
//
// The three records come from different buffers (the calling thread's,
// CUPTI's), so they may arrive in any order: whichever arrives last
// completes the join. Memory is bounded: launches and calls are kept in
// FIFO windows, waiting kernels in a short queue; what falls out is counted
// as unmatched, never guessed.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stallscope/analyzer/model.hpp"

namespace stallscope::analyzer {

class NcclJoin {
 public:
  // A host-side NCCL call (a collective flagged enqueued, with its identity).
  // One thread's calls arrive nearly in time order (one thread buffer; a
  // profiler plugin's event, recorded inside the call, comes before it).
  void add_call(const Ev& e);
  // A CUDA API call with a correlation id: a launch candidate. Until NCCL is
  // seen in the rank only the latest few are kept, in a plain ring, so
  // traces without NCCL pay next to nothing.
  void add_launch(const Ev& e);
  // An NCCL kernel without identity. True when it was joined at once (*e
  // gains the call's communicator, sequence, bytes and rank count, and its
  // op when the kernel's name gave none); else it
  // waits for its launch or its call and, once joined, shows up in joined().
  bool join(Ev& e);
  // Kernels joined by a launch or call that arrived after them; the caller
  // empties it.
  std::vector<Ev>& joined() { return late_; }

  uint64_t matched() const { return matched_; }
  // Kernels that can no longer be joined (no call spans their launch, or
  // they waited too long), plus those still waiting.
  uint64_t unmatched() const { return unmatched_ + waiting_n_; }

 private:
  struct Call {
    int64_t start, end;
    uint64_t comm, seq, bytes;
    uint32_t nranks, op;
  };
  struct Launch {
    uint32_t track;
    int64_t start;
  };
  enum class Outcome : uint8_t { kJoined, kNever, kNotYet };
  static constexpr size_t kMaxLaunches = size_t{1} << 16;
  static constexpr size_t kMaxCallsPerTrack = size_t{1} << 10;
  static constexpr size_t kMaxWaiting = size_t{1} << 12;

  // Joins e, launched at `l`, against the calls of l's thread seen so far.
  Outcome against_calls(Ev& e, const Launch& l);
  void settle(Ev& e, const Launch& l, bool late);

  void on_nccl();

  bool nccl_seen_ = false;
  // The shim's join-only call spans were seen: the profiler plugin's own
  // events (starting after the launch, nested in the call) are then left out.
  bool shim_spans_ = false;
  static constexpr size_t kRing = 1024;
  struct RingEntry {
    uint64_t corr = 0;
    Launch l{};
  };
  std::vector<RingEntry> ring_;  // before NCCL was seen
  size_t ring_at_ = 0;
  std::unordered_map<uint64_t, Launch> launches_;  // by correlation id
  std::deque<uint64_t> launch_order_;              // FIFO of launches_' keys
  struct Calls {
    std::deque<Call> q;     // sorted by start
    int64_t max_end = INT64_MIN;
  };
  std::unordered_map<uint32_t, Calls> calls_;  // by track
  // Kernels waiting for their launch (by correlation id, FIFO for eviction)
  // or, launch known, for the call of the launching thread.
  std::unordered_map<uint64_t, Ev> wait_launch_;
  std::deque<uint64_t> wait_launch_order_;
  std::unordered_map<uint32_t, std::deque<std::pair<int64_t, Ev>>> wait_call_;
  std::vector<Ev> late_;
  std::vector<std::pair<int64_t, Ev>> due_;  // add_call(): kernels settled by a call
  uint64_t matched_ = 0, unmatched_ = 0, waiting_n_ = 0;
};

}  // namespace stallscope::analyzer
