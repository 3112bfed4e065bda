#include "engine_collectives.hpp"

#include <algorithm>
#include <iterator>

namespace stallscope::analyzer {

void CollectiveLog::add(const Ev& e, TrackType type) {
  if (e.phase != format::kComplete || (e.coll().comm == 0 && e.coll().seq == 0)) return;
  if (type != TrackType::kGpuStream && !e.emulated) return;
  if (pending_.size() >= kMaxPending) pending_.pop_front();
  CollectiveInstance c;
  c.comm_id = e.coll().comm;
  c.seq = e.coll().seq;
  c.arrival_ns = e.start;
  c.end_ns = e.end;
  // Events come nearly in time order: the insertion point is near the back.
  auto it = pending_.end();
  while (it != pending_.begin() && std::prev(it)->arrival_ns > c.arrival_ns) --it;
  pending_.insert(it, c);
}

void CollectiveLog::on_step(int64_t s, int64_t e, const Ivs& comm, const Ivs& compute) {
  // Steps come in increasing time: an instance starting before e belongs to
  // this step or to none (between steps).
  if (pending_.empty() || pending_.front().arrival_ns >= e) return;
  subtract(comm, compute, tmp_);
  for (; !pending_.empty() && pending_.front().arrival_ns < e; pending_.pop_front()) {
    CollectiveInstance c = pending_.front();
    if (c.arrival_ns < s) continue;
    c.step_start_ns = s;
    c.exposed_at = static_cast<uint32_t>(exposed_.size());
    const int64_t b = std::min(c.end_ns, e);
    for (const Iv& x : tmp_) {
      const int64_t lo = std::max(x.a, c.arrival_ns), hi = std::min(x.b, b);
      if (lo < hi) exposed_.push_back({lo, hi});
    }
    c.exposed_n = static_cast<uint32_t>(exposed_.size() - c.exposed_at);
    done_.push_back(c);
  }
}

void CollectiveLog::take(RankReport& r) {
  r.collectives = std::move(done_);
  r.collective_exposed = std::move(exposed_);
}

}  // namespace stallscope::analyzer
