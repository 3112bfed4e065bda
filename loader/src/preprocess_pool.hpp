// The preprocessing pool: one tbb::parallel_pipeline per epoch, run inside
// a task_arena of a fixed number of workers. Its tokens are groups of the
// samples of a batch:
//   next   (serial, in order)  takes the next batch and cuts it into groups;
//   work   (parallel)          runs the user transform on one group;
//   finish (serial, in order)  once per batch, after its last group.
// So a batch costs one pipeline token per group — no arena enqueue, no
// worker wake-up and no condition variable per batch — and batches and the
// samples inside them come out in order. Group sizes adapt to the measured
// cost per item (about kTargetGroupNs of work per token) unless fixed.
// When the next batch is not ready, `next` parks the input with
// wait_until(): the pipeline's task is suspended (tbb::task::suspend), so
// no worker is held, and wake() resumes it. Header-only: the benchmark
// (bench/pool_overhead) runs exactly this code.
#pragma once

#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include <stallscope/clock.hpp>

namespace stallscope::loader::detail {

// One pipeline token: items [begin, end) of a batch. A cache line each, so
// the input writing the next group does not bounce a worker's line.
struct alignas(64) Group {
  void* batch = nullptr;
  size_t begin = 0, end = 0;
  bool last = false;  // the batch's last group: `finish` runs after it
  uint64_t seq = 0;   // position in the run
};

// The three stages, as callables (templated: no indirect call per token).
//   next(size_t* items) -> void*   serial, in order: the next batch and its
//                                  item count; nullptr ends the run. May park
//                                  with PreprocessPool::wait_until().
//   work(const Group&)             parallel, on any worker.
//   finish(void* batch)            serial, in batch order.
template <typename Next, typename Work, typename Finish>
struct PoolStages {
  Next next;
  Work work;
  Finish finish;
};
template <typename N, typename W, typename F>
PoolStages(N, W, F) -> PoolStages<N, W, F>;

class PreprocessPool {
 public:
  static constexpr double kTargetGroupNs = 40e3;  // token cost ~300 ns: < 1 %

  // Raises oneTBB's process-wide worker limit (cores - 1 by default) so that
  // the arena really gets `workers` threads; a tighter limit set by the
  // program still wins. group = 0: adaptive group size.
  explicit PreprocessPool(uint32_t workers, size_t group = 0)
      : limit_(tbb::global_control::max_allowed_parallelism, workers + 1),
        arena_(static_cast<int>(workers), 0),
        workers_(workers),
        fixed_group_(group),
        ns_per_tick_(stallscope::ns_per_tick()) {}

  // Runs the pipeline on the calling thread (which joins the arena) until
  // stages.next returns nullptr and every token is through. `tokens` bounds
  // the groups in flight.
  template <typename Stages>
  void run(Stages& stages, size_t tokens) {
    // Tokens travel as pointers into a ring of `tokens` groups (oneTBB
    // heap-allocates tokens larger than a pointer). A slot is reused only
    // when `tokens` newer groups were cut, and the in-order last stage
    // retires groups in order, so it is free by then.
    tokens = std::max<size_t>(tokens, 1);
    std::vector<Group> ring(tokens);
    arena_.execute([&] {
      Cursor c;
      tbb::parallel_pipeline(
          tokens,
          tbb::make_filter<void, Group*>(tbb::filter_mode::serial_in_order,
                                         [&](tbb::flow_control& fc) -> Group* {
                                           Group& g = ring[c.slot];
                                           if (++c.slot == tokens) c.slot = 0;
                                           return cut(stages, c, fc, g) ? &g : nullptr;
                                         }) &
              tbb::make_filter<Group*, Group*>(tbb::filter_mode::parallel,
                                               [&](Group* g) { return timed_work(stages, g); }) &
              tbb::make_filter<Group*, void>(tbb::filter_mode::serial_in_order, [&](Group* g) {
                if (g->last) stages.finish(g->batch);
              }));
    });
  }

  // Inside `next`: returns once ready() is true, without holding a worker
  // while it is false. ready() must be safe to call from any thread; the
  // side that makes it true calls wake() afterwards.
  template <typename Ready>
  void wait_until(Ready&& ready) {
    while (!ready()) {
      tbb::task::suspend([&](tbb::task::suspend_point tag) {
        std::lock_guard lock(mu_);
        if (ready()) tbb::task::resume(tag);
        else parked_ = tag;
      });
    }
  }
  void wake() noexcept {
    std::lock_guard lock(mu_);
    if (parked_) tbb::task::resume(*parked_);
    parked_.reset();
  }

  // Index of the calling worker within the arena (0 … workers-1).
  static uint32_t worker_index() noexcept {
    const int i = tbb::this_task_arena::current_thread_index();
    return i < 0 ? 0 : static_cast<uint32_t>(i);
  }
  uint32_t workers() const noexcept { return workers_; }
  // Items per group for a batch of n items (adaptive unless fixed).
  size_t group_for(size_t n) const noexcept {
    if (fixed_group_ > 0) return fixed_group_;
    const double per_item = ns_per_item_.load(std::memory_order_relaxed);
    if (per_item <= 0)  // nothing measured yet: two groups per worker
      return std::max<size_t>(1, (n + 2 * workers_ - 1) / (2 * workers_));
    return std::clamp<size_t>(static_cast<size_t>(kTargetGroupNs / per_item), 1, std::max<size_t>(n, 1));
  }

 private:
  struct Cursor {
    void* batch = nullptr;
    size_t items = 0, at = 0, group = 1;
    uint64_t seq = 0;
    size_t slot = 0;  // ring position of the next group
  };
  static constexpr uint64_t kTimeEvery = 8;  // groups timed for the estimate: 1 in 8 (power of 2)

  template <typename Stages>
  bool cut(Stages& s, Cursor& c, tbb::flow_control& fc, Group& g) {
    if (c.batch == nullptr || c.at >= c.items) {
      c.batch = s.next(&c.items);
      if (c.batch == nullptr) {
        fc.stop();
        return false;
      }
      c.at = 0;
      c.group = group_for(c.items);
    }
    g = Group{c.batch, c.at, std::min(c.items, c.at + c.group), false, c.seq++};
    c.at = g.end;
    g.last = c.at >= c.items;
    if (c.items == 0) c.at = 1;  // an empty batch is one empty group
    return true;
  }

  template <typename Stages>
  Group* timed_work(Stages& s, Group* g) {
    if (fixed_group_ != 0 || (g->seq & (kTimeEvery - 1)) != 0 || g->end == g->begin) {
      s.work(*g);
      return g;
    }
    const Ticks t0 = ticks_now();
    s.work(*g);
    const double ns = static_cast<double>(ticks_now() - t0) * ns_per_tick_ /
                      static_cast<double>(g->end - g->begin);
    // A decaying minimum: drops at once, grows at most 25 % per sample, so
    // a preempted group cannot shrink the groups of the next many batches.
    const double old = ns_per_item_.load(std::memory_order_relaxed);
    const double est = old <= 0 ? ns : std::min(ns, 1.25 * old);
    if (est != old) ns_per_item_.store(est, std::memory_order_relaxed);
    return g;
  }

  tbb::global_control limit_;
  tbb::task_arena arena_;
  uint32_t workers_;
  size_t fixed_group_;
  double ns_per_tick_;
  alignas(64) std::atomic<double> ns_per_item_{0};  // own cache line: written by workers
  alignas(64) std::mutex mu_;
  std::optional<tbb::task::suspend_point> parked_;
};

}  // namespace stallscope::loader::detail
