// A small open-addressing hash map from uint64 keys (not 0, not ~0) to
// uint64 values: one flat array, linear probing, no deletion. The lineage
// indexes every sample of the window here (a node-based map costs a malloc
// and a cache miss per sample); it forgets old keys by clear() and
// re-inserting the live ones, which reuses the table's memory.
//
// The home slot is the key (folded to 32 bits) mod a prime table size: runs of consecutive keys
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
    if (key < min_ || key > max_) return kAbsent;
    for (size_t i = home(key); slots_[i].key != 0; i = step(i))
      if (slots_[i].key == key) return slots_[i].value;
    return kAbsent;
  }
  // The value slot of `key`, inserted holding kAbsent when new (one probe
  // for a read-modify-write). `key` must not be 0 or ~0. Grows the table
  // when entries fill half of it; the reference is valid until the next
  // insertion.
  uint64_t& slot(uint64_t key) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = home(key);
    for (; slots_[i].key != 0; i = step(i))
      if (slots_[i].key == key) return slots_[i].value;
    slots_[i] = {key, kAbsent};
    ++size_;
    min_ = key < min_ ? key : min_;
    max_ = key > max_ ? key : max_;
    return slots_[i].value;
  }
  // Inserts or overwrites.
  void put(uint64_t key, uint64_t value) { slot(key) = value; }
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
  // key mod the prime table size, by multiplication (Lemire's fastmod on
  // the key folded to 32 bits: consecutive keys stay in consecutive slots).
  size_t home(uint64_t key) const noexcept {
    const uint64_t k32 = (key ^ (key >> 32)) & 0xffffffffu;
    return static_cast<size_t>((static_cast<unsigned __int128>(magic_ * k32) * slots_.size()) >> 64);
  }
  size_t step(size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void grow();

  std::vector<Slot> slots_;
  size_t size_ = 0;
  int prime_ = -1;       // index into the table of sizes
  uint64_t magic_ = 0;   // ~0 / slots_.size() + 1, for home()
  // The range of keys held (empty: min_ > max_). A key outside it is absent
  // without a probe: a table holding a dense run of old ids would otherwise
  // be probed along the whole run for each newer id that wraps onto it.
  uint64_t min_ = ~uint64_t{0}, max_ = 0;
  void assign(size_t slots);
};

}  // namespace stallscope::analyzer
