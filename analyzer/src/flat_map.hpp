// A small open-addressing hash map from uint64 keys (not 0, not ~0) to
// uint64 values: one flat array, linear probing, no deletion. The lineage
// indexes every sample of the window here (a node-based map costs a malloc
// and a cache miss per sample); it forgets old keys by clear() and
// re-inserting the live ones, which reuses the table's memory.
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
  // Inserts or overwrites. `key` must not be 0 or ~0. Grows the table when
  // entries fill half of it.
  void put(uint64_t key, uint64_t value);
  // Removes every entry, keeping the table.
  void clear() noexcept;
  // Makes room for `n` entries at most half the table (drops the entries).
  void reset(size_t n);
  size_t size() const noexcept { return size_; }
  // Entries that fit before put() grows the table.
  size_t room() const noexcept { return slots_.size() / 2; }

 private:
  struct Slot {
    uint64_t key = 0, value = 0;
  };
  size_t home(uint64_t key) const noexcept { return static_cast<size_t>(key % slots_.size()); }
  size_t step(size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void grow();

  std::vector<Slot> slots_;
  size_t size_ = 0;
  int prime_ = -1;  // index into the table of sizes
};

}  // namespace stallscope::analyzer
