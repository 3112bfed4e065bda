#include "nccl_join.hpp"

#include <algorithm>
#include <iterator>

namespace stallscope::analyzer {

// The launches seen before the first NCCL record become candidates.
void NcclJoin::on_nccl() {
  if (nccl_seen_) return;
  nccl_seen_ = true;
  for (size_t i = 0; i < ring_.size(); ++i) {
    const RingEntry& r = ring_[(ring_at_ + i) % ring_.size()];
    if (r.corr != 0 && launches_.try_emplace(r.corr, r.l).second) launch_order_.push_back(r.corr);
  }
  ring_ = {};
}

void NcclJoin::add_call(const Ev& e) {
  const Collective& c = e.coll();
  if (c.comm == 0 && c.seq == 0) return;  // no identity to give
  if (c.join_only) shim_spans_ = true;
  else if (shim_spans_) return;  // a profiler plugin's event: the shim's span serves
  on_nccl();
  Calls& calls = calls_[e.track];
  auto& q = calls.q;
  if (q.size() >= kMaxCallsPerTrack) q.pop_front();
  auto at = q.end();
  while (at != q.begin() && std::prev(at)->start > e.start) --at;
  q.insert(at, {e.start, e.end, c.comm, c.seq, c.bytes, c.nranks, static_cast<uint32_t>(c.op)});
  calls.max_end = std::max(calls.max_end, e.end);
  auto w = wait_call_.find(e.track);
  if (w == wait_call_.end()) return;
  // Kernels launched before the latest call's end are settled now: a call
  // holding their launch has arrived, or none will.
  auto& pending = w->second;
  due_.clear();
  for (auto it = pending.begin(); it != pending.end();) {
    if (it->first > calls.max_end) {
      ++it;
      continue;
    }
    due_.push_back(*it);
    it = pending.erase(it);
    --waiting_n_;
  }
  // Settled after the walk: settle() may queue into `pending` again.
  for (auto& [when, k] : due_) settle(k, Launch{e.track, when}, true);
}

void NcclJoin::add_launch(const Ev& e) {
  if (e.corr == 0) return;
  const Launch l{e.track, e.start};
  if (!nccl_seen_) {
    if (ring_.size() < kRing) {
      ring_.push_back({e.corr, l});
    } else {
      ring_[ring_at_] = {e.corr, l};
      ring_at_ = (ring_at_ + 1) % kRing;
    }
    return;
  }
  if (auto w = wait_launch_.find(e.corr); w != wait_launch_.end()) {
    // Its kernel was waiting: settled now, the launch needs no keeping
    // (a kernel still waiting for its call holds its launch itself).
    Ev k = w->second;
    wait_launch_.erase(w);  // its FIFO entry is skipped when it comes up
    --waiting_n_;
    settle(k, l, true);
  } else if (launches_.try_emplace(e.corr, l).second) {
    launch_order_.push_back(e.corr);
  }
  if (launch_order_.size() > kMaxLaunches) {
    launches_.erase(launch_order_.front());
    launch_order_.pop_front();
  }
}

NcclJoin::Outcome NcclJoin::against_calls(Ev& e, const Launch& l) {
  auto c = calls_.find(l.track);
  if (c == calls_.end() || c->second.q.empty()) return Outcome::kNotYet;
  const auto& q = c->second.q;
  // The latest call starting at or before the launch is the candidate (a
  // plugin's event nested in a call starts after the launch). A launch
  // past every call's end may still get its call.
  for (auto it = q.rbegin(); it != q.rend(); ++it) {
    if (it->start > l.start) continue;
    if (l.start > it->end)
      return l.start > c->second.max_end ? Outcome::kNotYet : Outcome::kNever;
    Collective& k = e.coll();
    k.comm = it->comm;
    k.seq = it->seq;
    k.bytes = it->bytes;
    k.nranks = it->nranks;
    if (k.op == format::CollOp::kUnknown) k.op = static_cast<format::CollOp>(it->op);
    return Outcome::kJoined;
  }
  return Outcome::kNever;  // launched before every call kept
}

void NcclJoin::settle(Ev& e, const Launch& l, bool late) {
  switch (against_calls(e, l)) {
    case Outcome::kJoined:
      ++matched_;
      launches_.erase(e.corr);  // one kernel per launch
      if (late) late_.push_back(e);
      return;
    case Outcome::kNever:
      ++unmatched_;
      return;
    case Outcome::kNotYet: {
      auto& q = wait_call_[l.track];
      if (q.size() >= kMaxWaiting) {
        q.pop_front();
        ++unmatched_;
        --waiting_n_;
      }
      q.emplace_back(l.start, e);
      ++waiting_n_;
      return;
    }
  }
}

bool NcclJoin::join(Ev& e) {
  on_nccl();
  auto l = launches_.find(e.corr);
  if (l != launches_.end()) {
    const Launch launch = l->second;
    const uint64_t before = matched_;
    settle(e, launch, false);
    return matched_ != before;
  }
  if (wait_launch_order_.size() >= kMaxWaiting) {
    // The oldest may have been joined already (its entry is then stale).
    if (wait_launch_.erase(wait_launch_order_.front()) != 0) {
      ++unmatched_;
      --waiting_n_;
    }
    wait_launch_order_.pop_front();
  }
  if (wait_launch_.try_emplace(e.corr, e).second) {
    wait_launch_order_.push_back(e.corr);
    ++waiting_n_;
  } else {
    ++unmatched_;  // two kernels with one correlation id: only the first can join
  }
  return false;
}

}  // namespace stallscope::analyzer
