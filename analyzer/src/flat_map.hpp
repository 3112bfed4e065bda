// A small open-addressing hash map from uint64 keys (not 0, not ~0) to
// values below 2^48: one flat array, linear probing, no deletion. The
// lineage indexes every sample of the window here (a node-based map costs a
// malloc and a cache miss per sample) in two generations of tables that it
// empties in turn; clear() is O(1): each slot carries the epoch it was
// written in, and a slot of an older epoch reads as empty.
//
// The home slot is the key (folded to 32 bits) mod a prime table size: runs
// of consecutive keys (sample ids usually are) land in consecutive slots, so
// a sliding window of ids touches few cache lines and never collides, and
// strided or shuffled ids still spread over the whole table.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analyzer {

class FlatMap64 {
 public:
  static constexpr uint64_t kAbsent = ~uint64_t{0};
  static constexpr int kValueBits = 48;  // the rest of a slot's value word is its epoch

  // The value of `key`, or kAbsent.
  uint64_t get(uint64_t key) const noexcept {
    if (key < min_ || key > max_) return kAbsent;
    for (size_t i = home(key); live(slots_[i]); i = step(i))
      if (slots_[i].key == key) return value_of(slots_[i]);
    return kAbsent;
  }
  // Sets `key` to `value` (< 2^48) and returns its previous value, or
  // kAbsent when it was not there: one probe for a read-modify-write.
  // `key` must not be 0 or ~0. Grows the table when entries fill half of it.
  uint64_t exchange(uint64_t key, uint64_t value) {
    assert(value <= kValueMask && key != 0 && key != kAbsent);
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const uint64_t word = (epoch_ << kValueBits) | value;
    size_t i = home(key);
    for (; live(slots_[i]); i = step(i)) {
      if (slots_[i].key != key) continue;
      const uint64_t old = value_of(slots_[i]);
      slots_[i].word = word;
      return old;
    }
    slots_[i] = {key, word};
    ++size_;
    min_ = key < min_ ? key : min_;
    max_ = key > max_ ? key : max_;
    return kAbsent;
  }
  // Inserts or overwrites.
  void put(uint64_t key, uint64_t value) { exchange(key, value); }
  // Removes every entry, keeping the table.
  void clear() noexcept;
  // Makes room for `n` entries at most half the table (drops the entries).
  void reset(size_t n);
  size_t size() const noexcept { return size_; }
  // Entries that fit before put() grows the table.
  size_t room() const noexcept { return slots_.size() / 2; }

 private:
  struct Slot {
    uint64_t key = 0;   // 0: never written
    uint64_t word = 0;  // epoch << kValueBits | value
  };
  static constexpr uint64_t kValueMask = (uint64_t{1} << kValueBits) - 1;
  static constexpr uint64_t kMaxEpoch = (uint64_t{1} << (64 - kValueBits)) - 1;
  bool live(const Slot& s) const noexcept { return s.key != 0 && (s.word >> kValueBits) == epoch_; }
  static uint64_t value_of(const Slot& s) noexcept { return s.word & kValueMask; }
  // key mod the prime table size, by multiplication (Lemire's fastmod on
  // the key folded to 32 bits: consecutive keys stay in consecutive slots).
  // The high word of the 96-bit product (magic × k32) × size is taken in
  // two 32 × 32-bit halves (size < 2^32).
  size_t home(uint64_t key) const noexcept {
    const uint64_t k32 = (key ^ (key >> 32)) & 0xffffffffu;
    const uint64_t low = magic_ * k32, d = slots_.size();
    return static_cast<size_t>(((low >> 32) * d + (((low & 0xffffffffu) * d) >> 32)) >> 32);
  }
  size_t step(size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void grow();
  void assign(size_t slots);

  std::vector<Slot> slots_;
  size_t size_ = 0;
  int prime_ = -1;       // index into the table of sizes
  uint64_t magic_ = 0;   // ~0 / slots_.size() + 1, for home()
  uint64_t epoch_ = 1;   // of the entries held; slots of other epochs are empty
  // The range of keys held (empty: min_ > max_). A key outside it is absent
  // without a probe: a table holding a dense run of old ids would otherwise
  // be probed along the whole run for each newer id that wraps onto it.
  uint64_t min_ = ~uint64_t{0}, max_ = 0;
};

}  // namespace stallscope::analyzer
