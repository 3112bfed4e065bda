// A small open-addressing hash map from uint64 keys (not 0, not ~0) to
// uint64 values: one flat array, linear probing, tombstones cleared by a
// rehash. The
// lineage indexes every sample of the window here; a node-based map costs a
// malloc and a cache miss per sample.
//
// The home slot is key mod a prime table size: runs of consecutive keys
// (sample ids usually are) land in consecutive slots, so a sliding window of
// ids touches few cache lines and never collides, and strided or shuffled
// ids still spread over the whole table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analyzer {

class FlatMap64 {
 public:
  static constexpr uint64_t kAbsent = ~uint64_t{0};

  // The value of `key`, or kAbsent.
  uint64_t get(uint64_t key) const noexcept {
    if (slots_.empty()) return kAbsent;
    for (size_t i = home(key); slots_[i].key != 0; i = step(i))
      if (slots_[i].key == key) return slots_[i].value;
    return kAbsent;
  }
  // Inserts or overwrites. `key` must not be 0 or ~0.
  void put(uint64_t key, uint64_t value);
  // Removes `key` when it maps to `value` (a newer entry is left alone).
  void erase_if_equal(uint64_t key, uint64_t value) noexcept;
  size_t size() const noexcept { return size_; }

 private:
  static constexpr uint64_t kTomb = ~uint64_t{0};
  struct Slot {
    uint64_t key = 0, value = 0;
  };
  size_t home(uint64_t key) const noexcept { return static_cast<size_t>(key % slots_.size()); }
  size_t step(size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void rehash();

  std::vector<Slot> slots_;
  size_t size_ = 0, used_ = 0;  // live entries; live + tombstones
  int prime_ = -1;  // index into the table of sizes
};

}  // namespace stallscope::analyzer
