// stallscope analyzer — SpillVector<T>: the per-step and per-collective tables
// of a report, with only a few chunks of each in memory. Older chunks move to
// one unlinked scratch file of the process ($TMPDIR, else /tmp) and come back
// when read, so a report's memory does not grow with run length (the scratch
// file does, by the table's size). Without a usable scratch file the table
// stays in memory, as a plain vector would.
//
//   SpillVector<StepResult> steps;
//   steps.push_back(s);
//   for (const StepResult& s : steps) ...   // elements come out by value
//   StepResult x = steps[i]; x.outlier = true; steps.set(i, x);
//
// Elements are copied in and out (no references into the table but peek's
// and edit's, valid until the table is next used). Not thread-safe, not even
// for reads (they load chunks): one table, one thread at a time. Different
// tables may be used from different threads. After fork() without exec,
// parent and child share the scratch file: only one of them may go on using
// the tables that existed before the fork.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stallscope::analyzer {

namespace spill {

// The process's scratch file: chunk-sized extents, reused once released.
// Thread-safe.
class Arena {
 public:
  static Arena& instance();
  // An extent of `bytes`, or -1 when there is no scratch file to be had.
  int64_t reserve(size_t bytes);
  void release(int64_t off, size_t bytes) noexcept;
  bool write(int64_t off, const void* p, size_t n) noexcept;
  // Throws std::runtime_error (naming the scratch file) when the read fails.
  void read(int64_t off, void* p, size_t n);
  // Bytes written to the scratch file and not released (for tests, benchmarks).
  uint64_t bytes_in_use() const noexcept;
  // Why tables stay in memory ("" while the scratch file works): the first
  // failure to create or write it, naming the directory and the error.
  std::string failure() const;
};

}  // namespace spill

template <class T>
class SpillVector {
  static_assert(std::is_trivially_copy_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "SpillVector moves elements as bytes");

 public:
  // Elements per chunk: 16 KiB of them, at least 64 and at most 256. A
  // table's memory stops growing once it holds kResident chunks, so small
  // elements get small chunks: every table reaches its bound within 512
  // elements.
  static constexpr size_t kChunk = std::clamp<size_t>(16384 / sizeof(T), 64, 256);
  static constexpr size_t kResident = 2;   // chunks held in memory at most

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = T;
    using pointer = void;
    const_iterator() = default;
    const_iterator(const SpillVector* v, size_t i) : v_(v), i_(i) {}
    T operator*() const { return (*v_)[i_]; }
    T operator[](difference_type n) const { return (*v_)[i_ + static_cast<size_t>(n)]; }
    const_iterator& operator++() { ++i_; return *this; }
    const_iterator operator++(int) { auto c = *this; ++i_; return c; }
    const_iterator& operator--() { --i_; return *this; }
    const_iterator operator--(int) { auto c = *this; --i_; return c; }
    const_iterator& operator+=(difference_type n) { i_ += static_cast<size_t>(n); return *this; }
    const_iterator& operator-=(difference_type n) { i_ -= static_cast<size_t>(n); return *this; }
    const_iterator operator+(difference_type n) const { auto c = *this; return c += n; }
    const_iterator operator-(difference_type n) const { auto c = *this; return c -= n; }
    difference_type operator-(const const_iterator& o) const {
      return static_cast<difference_type>(i_) - static_cast<difference_type>(o.i_);
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    auto operator<=>(const const_iterator& o) const { return i_ <=> o.i_; }

   private:
    const SpillVector* v_ = nullptr;
    size_t i_ = 0;
  };

  SpillVector() = default;
  SpillVector(const std::vector<T>& v) {  // NOLINT: converts, like the vector it replaces
    for (const T& x : v) push_back(x);
  }
  SpillVector(std::initializer_list<T> v) {
    for (const T& x : v) push_back(x);
  }
  SpillVector(const SpillVector& o) {
    for (size_t i = 0; i < o.size(); ++i) push_back(o[i]);
  }
  SpillVector(SpillVector&& o) noexcept { swap(o); }
  SpillVector& operator=(SpillVector o) noexcept {
    swap(o);
    return *this;
  }
  ~SpillVector() { clear(); }

  void swap(SpillVector& o) noexcept {
    chunks_.swap(o.chunks_);
    std::swap(size_, o.size_);
    resident_.swap(o.resident_);
    spare_.swap(o.spare_);
    std::swap(tick_, o.tick_);
    std::swap(pinned_, o.pinned_);
  }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

  T operator[](size_t i) const { return chunk(i / kChunk, false)[i % kChunk]; }
  T at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SpillVector::at");
    return (*this)[i];
  }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size_ - 1]; }
  void set(size_t i, const T& v) { chunk(i / kChunk, true)[i % kChunk] = v; }
  // Element i in place, valid until the table is next used (any access may
  // move its chunk out): for reading or changing one element without a copy.
  const T& peek(size_t i) const { return chunk(i / kChunk, false)[i % kChunk]; }
  T& edit(size_t i) { return chunk(i / kChunk, true)[i % kChunk]; }

  void push_back(const T& v) {
    if (size_ % kChunk == 0) chunks_.emplace_back();
    ++size_;
    set(size_ - 1, v);
  }

  void clear() noexcept {
    for (Chunk& c : chunks_)
      if (c.off >= 0) spill::Arena::instance().release(c.off, kBytes);
    chunks_.clear();
    size_ = 0;
    resident_.clear();
    spare_.reset();
    pinned_ = false;
  }

  // All elements in a plain vector (as much memory as the table's size).
  std::vector<T> to_vector() const {
    std::vector<T> v;
    v.reserve(size_);
    for (size_t i = 0; i < size_; ++i) v.push_back((*this)[i]);
    return v;
  }

  // Writes the chunks held in memory out and frees them (a table set aside
  // for a while: the next access reads its chunk back). Those the scratch
  // file cannot take stay.
  void release() const {
    while (!resident_.empty() && !pinned_) evict();
    spare_.reset();
  }

  // Chunks held in memory now (at most kResident while the scratch file works).
  size_t resident_chunks() const noexcept { return resident_.size(); }

 private:
  static constexpr size_t kBytes = kChunk * sizeof(T);
  struct Chunk {
    std::unique_ptr<T[]> mem;
    int64_t off = -1;    // extent in the scratch file, -1: none yet
    bool dirty = false;  // changed since last written out
    uint64_t used = 0;
  };

  T* chunk(size_t c, bool for_write) const {
    Chunk& k = chunks_[c];
    if (!k.mem) [[unlikely]]
      load(c);
    k.used = ++tick_;
    k.dirty = k.dirty || for_write;
    return k.mem.get();
  }

  void load(size_t c) const {
    make_room();
    Chunk& k = chunks_[c];
    // The last chunk moved out lends its memory (no allocation, no
    // construction of kChunk elements that are overwritten at once).
    k.mem = spare_ ? std::move(spare_) : std::make_unique<T[]>(kChunk);
    if (k.off >= 0) spill::Arena::instance().read(k.off, k.mem.get(), kBytes);
    resident_.push_back(c);
  }

  // Room for one more chunk: when kResident are held, the least recently
  // used one is written out and freed. If the scratch file fails, everything
  // stays in memory from then on.
  void make_room() const {
    if (!pinned_ && resident_.size() >= kResident) evict();
  }

  void evict() const {
    size_t lru = 0;
    for (size_t j = 1; j < resident_.size(); ++j)
      if (chunks_[resident_[j]].used < chunks_[resident_[lru]].used) lru = j;
    Chunk& k = chunks_[resident_[lru]];
    if (k.dirty) {
      spill::Arena& a = spill::Arena::instance();
      if (k.off < 0) k.off = a.reserve(kBytes);
      if (k.off < 0 || !a.write(k.off, k.mem.get(), kBytes)) {
        pinned_ = true;  // the scratch file failed: everything stays in memory
        return;
      }
      k.dirty = false;
    }
    spare_ = std::move(k.mem);
    resident_[lru] = resident_.back();
    resident_.pop_back();
  }

  mutable std::vector<Chunk> chunks_;
  mutable std::vector<size_t> resident_;  // indices of the chunks in memory
  mutable std::unique_ptr<T[]> spare_;     // memory of the chunk last moved out
  mutable uint64_t tick_ = 0;
  mutable bool pinned_ = false;
  size_t size_ = 0;
};

}  // namespace stallscope::analyzer
