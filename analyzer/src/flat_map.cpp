#include "flat_map.hpp"

#include <algorithm>
#include <iterator>

namespace stallscope::analyzer {

namespace {
// The largest prime below each power of two from 2^10.
constexpr uint64_t kPrimes[] = {1021,      2039,      4093,       8191,       16381,     32749,
                                65521,     131071,    262139,     524287,     1048573,   2097143,
                                4194301,   8388593,   16777213,   33554393,   67108859,  134217689,
                                268435399, 536870909, 1073741789, 2147483647, 4294967291ull};
}  // namespace

void FlatMap64::assign(size_t slots) {
  slots_.assign(slots, Slot{});
  magic_ = ~uint64_t{0} / slots + 1;
  epoch_ = 1;
  size_ = 0;
  min_ = ~uint64_t{0};
  max_ = 0;
}

void FlatMap64::clear() noexcept {
  if (++epoch_ > kMaxEpoch) {  // every 65,535 clears: the slots are wiped for real
    std::fill(slots_.begin(), slots_.end(), Slot{});
    epoch_ = 1;
  }
  size_ = 0;
  min_ = ~uint64_t{0};
  max_ = 0;
}

void FlatMap64::reset(size_t n) {
  prime_ = -1;
  while (prime_ + 1 < static_cast<int>(std::size(kPrimes)) &&
         (prime_ < 0 || kPrimes[prime_] < 2 * n))
    ++prime_;
  assign(kPrimes[prime_]);
}

void FlatMap64::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  const uint64_t epoch = epoch_;
  if (prime_ + 1 < static_cast<int>(std::size(kPrimes))) ++prime_;
  assign(kPrimes[prime_]);
  for (const Slot& s : old)
    if (s.key != 0 && (s.word >> kValueBits) == epoch) put(s.key, value_of(s));
}

}  // namespace stallscope::analyzer
