// A FIFO of trivially copyable values in one power-of-two array: push at
// the back, pop at the front, index from the front. The lineage keeps its
// window of items and links here; a std::deque allocates and frees a node
// every few hundred bytes as the window slides.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace stallscope::analyzer {

template <typename T>
class Ring {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // i-th value from the front (i < size()).
  T& operator[](size_t i) noexcept { return buf_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const noexcept { return buf_[(head_ + i) & mask_]; }
  T& front() noexcept { return buf_[head_]; }
  const T& front() const noexcept { return buf_[head_]; }
  const T& back() const noexcept { return (*this)[size_ - 1]; }

  void push_back(const T& v) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & mask_] = v;
    ++size_;
  }
  void pop_front() noexcept {
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  // Drops the first n values (n <= size()).
  void pop_front(size_t n) noexcept {
    head_ = (head_ + n) & mask_;
    size_ -= n;
  }
  // The number of leading values for which pred holds, when it holds for a
  // prefix and then never again (binary search).
  template <typename Pred>
  size_t partition_point(Pred&& pred) const {
    size_t lo = 0, hi = size_;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (pred((*this)[mid])) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  // Inserts `v` before the i-th value (i <= size()), moving the values behind it.
  void insert(size_t i, const T& v) {
    push_back(v);
    for (size_t k = size_ - 1; k > i; --k) (*this)[k] = (*this)[k - 1];
    (*this)[i] = v;
  }
  // Keeps the first n values (n <= size()).
  void truncate(size_t n) noexcept { size_ = n; }

 private:
  void grow() {
    std::vector<T> next(buf_.empty() ? 64 : buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) next[i] = (*this)[i];
    buf_.swap(next);
    head_ = 0;
    mask_ = buf_.size() - 1;
  }

  std::vector<T> buf_;
  size_t head_ = 0, size_ = 0, mask_ = 0;
};

}  // namespace stallscope::analyzer
