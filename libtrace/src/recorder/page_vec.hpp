// A growable array of trivially copyable values in pages of its own
// (mmap/mremap), never in the C heap. The recorder's threads (flusher,
// sampler) keep their working sets in these: a thread's first malloc or
// free makes glibc give it an arena of its own (64 MiB of address space
// reserved, RELIABILITY.md 39), and the program's heap is the program's.
// Growth that fails (address space exhausted) returns false; the caller
// turns tracing off.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace stallscope::detail {

template <typename T>
class PageVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PageVec() = default;
  ~PageVec() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  PageVec(const PageVec&) = delete;
  PageVec& operator=(const PageVec&) = delete;

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  void clear() noexcept { size_ = 0; }

  // Room for `n` values without growing; false when memory ran out.
  bool reserve(size_t n) noexcept {
    if (n <= cap_) return true;
    const size_t page = 4096;
    size_t bytes = bytes_ * 2;
    if (bytes < n * sizeof(T)) bytes = n * sizeof(T);
    bytes = (bytes + page - 1) / page * page;
    void* p = data_ == nullptr
                  ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                  : ::mremap(data_, bytes_, bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) return false;
    data_ = static_cast<T*>(p);
    bytes_ = bytes;
    cap_ = bytes / sizeof(T);
    return true;
  }
  // Grows (new values set to `fill`) or shrinks to `n`; false when memory ran out.
  bool resize(size_t n, const T& fill = T{}) noexcept {
    if (!reserve(n)) return false;
    for (size_t i = size_; i < n; ++i) data_[i] = fill;
    size_ = n;
    return true;
  }
  // Grows or shrinks to `n`, new values left as they are (to be written).
  bool grow_to(size_t n) noexcept {
    if (!reserve(n)) return false;
    size_ = n;
    return true;
  }
  bool push_back(const T& v) noexcept {
    if (!reserve(size_ + 1)) return false;
    data_[size_++] = v;
    return true;
  }
  bool append(const T* v, size_t n) noexcept {
    if (!reserve(size_ + n)) return false;
    if (n != 0) std::memcpy(data_ + size_, v, n * sizeof(T));
    size_ += n;
    return true;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
  size_t bytes_ = 0;  // mapped
};

}  // namespace stallscope::detail
