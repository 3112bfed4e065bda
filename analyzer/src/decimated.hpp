// Decimated<T>: a bounded sample of a stream for medians and percentiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analyzer {

// Values kept for a median or percentile in bounded memory: all of them up
// to `cap`, then every 2nd, every 4th, … of the stream (evenly spread over
// it), so a short run's figures are exact and a long run's are close.
template <class T>
class Decimated {
 public:
  explicit Decimated(size_t cap = 4096) : cap_(cap < 2 ? 2 : cap) {}
  void add(const T& x) {
    if (seen_++ % stride_ != 0) return;
    v_.push_back(x);
    if (v_.size() < cap_) return;
    for (size_t i = 0; 2 * i < v_.size(); ++i) v_[i] = v_[2 * i];
    v_.resize((v_.size() + 1) / 2);
    stride_ *= 2;
  }
  const std::vector<T>& values() const noexcept { return v_; }
  std::vector<T>& values() noexcept { return v_; }  // to reorder in place (nth_element)
  uint64_t seen() const noexcept { return seen_; }

 private:
  std::vector<T> v_;
  size_t cap_;
  uint64_t stride_ = 1, seen_ = 0;
};

}  // namespace stallscope::analyzer
