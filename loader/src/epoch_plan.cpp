// Seeded shuffles and the split of an epoch across ranks. Our own generator
// and bounded draw, because std::shuffle and the std distributions differ
// between standard libraries: every rank must compute the same order.
#include "stallscope/loader/dataset.hpp"

namespace stallscope::loader {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (rejection of the top remainder).
uint64_t bounded(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    const uint64_t r = splitmix64(state);
    if (r < limit) return r % bound;
  }
}

}  // namespace

std::vector<uint64_t> shuffled_indices(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = i;
  uint64_t state = seed ^ (epoch * 0xd1b54a32d192ed03ull) ^ 0x5851f42d4c957f2dull;
  for (uint64_t i = n; i > 1; --i) std::swap(v[i - 1], v[bounded(state, i)]);
  return v;
}

EpochPlan make_epoch_plan(const Dataset& ds, const EpochSpec& spec) {
  EpochPlan plan;
  plan.epoch = spec.epoch;
  const uint64_t n = ds.size();
  if (n == 0 || spec.world_size == 0) return plan;
  std::vector<uint64_t> order;
  if (spec.shuffle) {
    order = shuffled_indices(n, spec.seed, spec.epoch);
  } else {
    order.resize(n);
    for (uint64_t i = 0; i < n; ++i) order[i] = i;
  }
  const uint64_t per_rank = (n + spec.world_size - 1) / spec.world_size;
  plan.samples.reserve(per_rank);
  for (uint64_t k = 0; k < per_rank; ++k)
    plan.samples.push_back(order[(k * spec.world_size + spec.rank) % n]);
  return plan;
}

}  // namespace stallscope::loader
