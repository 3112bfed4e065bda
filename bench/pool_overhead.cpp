// pool_overhead — items per second through the loader's preprocessing pool
// (PreprocessPool: a parallel_pipeline whose tokens are groups of a batch,
// adaptive group size, batch-level in-order finish) against a bare
// tbb::parallel_pipeline with the same filters: serial in-order input of a
// batch, parallel transform of its items, serial in-order output; same
// workers, same tokens, trivial work. Both take batches from the same
// source, so the difference is the pool's own cost (its group cutting and
// sampled timing). Rounds alternate the two; the median
// ratio is the result (target >= 0.9), with the spread of the rounds
// printed as the noise band. A third column runs the pool with a
// fixed group of items/(2*workers) — four tokens per batch — to show what a
// token costs when the work is this small.
//   pool_overhead [items_per_batch=256] [batches=300000] [workers=2] [rounds=11]
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "preprocess_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using stallscope::loader::detail::Group;
using stallscope::loader::detail::PoolStages;
using stallscope::loader::detail::PreprocessPool;

// The trivial work, identical on both sides (one multiply-add per item).
inline void work(uint64_t* first, uint64_t* last) {
  for (uint64_t* x = first; x != last; ++x) *x = *x * 6364136223846793005ull + 1442695040888963407ull;
}

struct Source {  // the batches both sides consume
  size_t items, batches, produced = 0, done = 0;
  std::vector<std::vector<uint64_t>> data;
  Source(size_t i, size_t b, size_t tokens) : items(i), batches(b), data(tokens, std::vector<uint64_t>(i, 1)) {}
  std::vector<uint64_t>* next() { return produced == batches ? nullptr : &data[produced++ % data.size()]; }
};

double items_per_s(const Source& s, Clock::time_point t0) {
  return double(s.done * s.items) / std::chrono::duration<double>(Clock::now() - t0).count();
}

double run_pool(size_t items, size_t batches, uint32_t workers, size_t tokens, size_t group) {
  PreprocessPool pool(workers, group);
  Source src(items, batches, tokens);
  PoolStages stages{
      [&](size_t* n) -> void* {
        *n = src.items;
        return src.next();
      },
      [](const Group& g) {
        uint64_t* v = static_cast<std::vector<uint64_t>*>(g.batch)->data();
        work(v + g.begin, v + g.end);
      },
      [&](void*) { ++src.done; }};
  const auto t0 = Clock::now();
  pool.run(stages, tokens);
  return items_per_s(src, t0);
}

double run_pipeline(size_t items, size_t batches, uint32_t workers, size_t tokens) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, workers + 1);
  tbb::task_arena arena(static_cast<int>(workers), 0);
  Source src(items, batches, tokens);
  using V = std::vector<uint64_t>;
  const auto t0 = Clock::now();
  arena.execute([&] {
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, V*>(tbb::filter_mode::serial_in_order,
                                   [&](tbb::flow_control& fc) -> V* {
                                     V* v = src.next();
                                     if (v == nullptr) fc.stop();
                                     return v;
                                   }) &
            tbb::make_filter<V*, V*>(tbb::filter_mode::parallel,
                                     [](V* v) {
                                       work(v->data(), v->data() + v->size());
                                       return v;
                                     }) &
            tbb::make_filter<V*, void>(tbb::filter_mode::serial_in_order, [&](V*) { ++src.done; }));
  });
  return items_per_s(src, t0);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const size_t batches = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 300000;
  const uint32_t workers = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 2;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 11;
  const size_t tokens = 4 * workers;  // what the loader uses
  const size_t small = std::max<size_t>(1, items / (2 * workers));
  std::vector<double> ratios, fixed;
  std::printf("%-6s %16s %16s %8s %20s\n", "round", "pool items/s", "pipeline items/s", "ratio",
              "pool group=n/2w ratio");
  run_pool(items, batches / 10, workers, tokens, 0);  // warm threads and the estimate
  for (int round = 0; round < rounds; ++round) {
    const bool pool_first = round % 2 == 1;  // alternate the order against drift
    double pool = pool_first ? run_pool(items, batches, workers, tokens, 0) : 0;
    const double pipe = run_pipeline(items, batches, workers, tokens);
    if (!pool_first) pool = run_pool(items, batches, workers, tokens, 0);
    const double pool_small = run_pool(items, batches, workers, tokens, small);
    ratios.push_back(pool / pipe);
    fixed.push_back(pool_small / pipe);
    std::printf("%-6d %16.0f %16.0f %8.3f %20.3f\n", round, pool, pipe, pool / pipe, pool_small / pipe);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(fixed.begin(), fixed.end());
  const double r = ratios[ratios.size() / 2];
  std::printf("noise band (pool/pipeline over rounds): %.3f .. %.3f\n", ratios.front(), ratios.back());
  std::printf("RESULT pool_fixed_small_groups_vs_parallel_pipeline %.3f ratio target >= 0 PASS\n",
              fixed[fixed.size() / 2]);
  std::printf("RESULT pool_vs_parallel_pipeline %.3f ratio target >= 0.9 %s\n", r,
              r >= 0.9 ? "PASS" : "MISS");
  return 0;
}
