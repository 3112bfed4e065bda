// What the recorder knows across threads: interned names, tracks, and the
// thread buffers to drain. Registration takes a mutex (once per name or
// thread); the hot path never touches this class.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "recorder/page_vec.hpp"
#include "stallscope/internal/thread_buffer.hpp"
#include "stallscope/format.hpp"

namespace stallscope::detail {

class Registry {
 public:
  explicit Registry(size_t memory_budget) : budget_(memory_budget) {}

  // Returns the id of `name`, adding it when new (0 on allocation failure).
  uint32_t intern(std::string_view name);
  // Registers a track and, for threads, a buffer of `buffer_bytes` within
  // the memory budget (nullptr when the budget is spent: the thread's events
  // are then dropped and counted on its track; nullptr and
  // take_alloc_failure() true when memory ran out: *track_out is 0 if even
  // the track could not be had). Never throws.
  ThreadBuffer* add_thread(uint32_t tid, std::string_view name, size_t buffer_bytes,
                           format::TrackType type = format::TrackType::kThread,
                           uint32_t* track_out = nullptr);
  void rename_track(uint32_t track_id, std::string_view name);
  // Whether an allocation failed since the last call (then clears it).
  bool take_alloc_failure() noexcept {
    return alloc_failed_.load(std::memory_order_relaxed) && alloc_failed_.exchange(false);
  }
  // The text of an interned id ("" when unknown). Takes the lock: the
  // flusher calls it once per new name, never the hot path.
  std::string name_of(uint32_t id);
  // The drop counter of a thread that got no buffer: the thread increments
  // it (relaxed) for each event, without a lock; stable for the process.
  std::atomic<uint64_t>* unbuffered_counter(uint32_t track_id);

  // Flusher side, allocating nothing from the C heap (page_vec.hpp): string
  // and track entries added since the last call, serialized as chunk
  // payloads into `out` (emptied first; left empty when none). False when
  // memory ran out.
  bool take_new_strings(PageVec<uint8_t>& out);
  bool take_new_tracks(PageVec<uint8_t>& out);
  // The same in a vector (C heap: not for the recorder's threads).
  std::vector<uint8_t> take_new_strings();
  std::vector<uint8_t> take_new_tracks();
  // Buffers to drain (snapshot into `out`); retired, drained buffers are
  // freed by collect_retired().
  bool buffers(PageVec<ThreadBuffer*>& out);
  // Whether a buffer holds more than 1/`parts` of its capacity.
  bool any_buffer_past(size_t parts);
  bool collect_retired();
  // Per-track totals for the End chunk (dropped_disk from the flusher).
  struct Totals {
    uint32_t track_id;
    uint64_t dropped_buffer;
  };
  std::vector<Totals> totals();

  // Fork child: takes over the parent's names (call sites cache their ids)
  // so they are written again into the child's own file. The parent's
  // tracks and buffers are not taken: their events are the parent's.
  void adopt_names_after_fork(const Registry& parent);
  void set_budget(size_t bytes) { budget_ = bytes; }
  std::mutex& mutex() { return mu_; }

 private:
  ThreadBuffer* add_thread_locked(uint32_t name_id, uint32_t tid, size_t buffer_bytes,
                                 format::TrackType type, uint32_t* track_out);

  std::mutex mu_;
  std::atomic<bool> alloc_failed_{false};
  size_t budget_;
  size_t allocated_ = 0;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string_view> names_;   // by id - 1, views into ids_ keys
  size_t strings_flushed_ = 0;
  std::vector<format::TrackEntry> tracks_;
  size_t tracks_flushed_ = 0;
  std::vector<format::TrackEntry> renamed_;
  size_t renamed_flushed_ = 0;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
  PageVec<uint64_t> retired_drops_;  // of retired buffers, by track id
  std::deque<std::atomic<uint64_t>> unbuffered_counters_;
  std::unordered_map<uint32_t, std::atomic<uint64_t>*> unbuffered_by_track_;
};

}  // namespace stallscope::detail
