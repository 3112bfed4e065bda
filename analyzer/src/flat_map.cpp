#include "flat_map.hpp"

#include <iterator>

namespace stallscope::analyzer {

namespace {
// The largest prime below each power of two from 2^10.
constexpr uint64_t kPrimes[] = {1021,      2039,      4093,       8191,       16381,     32749,
                                65521,     131071,    262139,     524287,     1048573,   2097143,
                                4194301,   8388593,   16777213,   33554393,   67108859,  134217689,
                                268435399, 536870909, 1073741789, 2147483647, 4294967291ull};
}  // namespace

void FlatMap64::put(uint64_t key, uint64_t value) {
  if ((used_ + 1) * 4 > slots_.size() * 3) rehash();
  size_t i = home(key), tomb = slots_.size();
  for (; slots_[i].key != 0 && slots_[i].key != key; i = step(i))
    if (slots_[i].key == kTomb && tomb == slots_.size()) tomb = i;
  if (slots_[i].key == key) {
    slots_[i].value = value;
    return;
  }
  if (tomb != slots_.size()) {
    i = tomb;  // reuses a tombstone: `used_` unchanged
  } else {
    ++used_;
  }
  slots_[i] = {key, value};
  ++size_;
}

void FlatMap64::erase_if_equal(uint64_t key, uint64_t value) noexcept {
  if (slots_.empty()) return;
  for (size_t i = home(key); slots_[i].key != 0; i = step(i)) {
    if (slots_[i].key != key) continue;
    if (slots_[i].value == value) {
      slots_[i].key = kTomb;  // a tombstone keeps probe runs intact
      --size_;
    }
    return;
  }
}

// Grows when live entries fill half the table, else only clears tombstones.
void FlatMap64::rehash() {
  std::vector<Slot> old;
  old.swap(slots_);
  if (size_ * 2 >= old.size() && prime_ + 1 < static_cast<int>(std::size(kPrimes))) ++prime_;
  slots_.assign(kPrimes[prime_ < 0 ? ++prime_ : prime_], Slot{});
  size_ = used_ = 0;
  for (const Slot& s : old)
    if (s.key != 0 && s.key != kTomb) put(s.key, s.value);
}

}  // namespace stallscope::analyzer
