#include "recorder/registry.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace stallscope::detail {

uint32_t Registry::intern(std::string_view name) {
  std::lock_guard lock(mu_);
  try {
    auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    auto [pos, ok] = ids_.emplace(std::string(name), static_cast<uint32_t>(names_.size() + 1));
    names_.push_back(pos->first);
    return pos->second;
  } catch (...) {
    alloc_failed_.store(true);
    return 0;
  }
}

std::string Registry::name_of(uint32_t id) {
  std::lock_guard lock(mu_);
  if (id == 0 || id > names_.size()) return {};
  return std::string(names_[id - 1]);
}

ThreadBuffer* Registry::add_thread(uint32_t tid, std::string_view name, size_t buffer_bytes,
                                   format::TrackType type, uint32_t* track_out) {
  if (track_out != nullptr) *track_out = 0;
  const uint32_t name_id = name.empty() ? 0 : intern(name);
  std::lock_guard lock(mu_);
  try {
    return add_thread_locked(name_id, tid, buffer_bytes, type, track_out);
  } catch (...) {  // out of memory: the caller turns tracing off
    alloc_failed_.store(true);
    return nullptr;
  }
}

ThreadBuffer* Registry::add_thread_locked(uint32_t name_id, uint32_t tid, size_t buffer_bytes,
                                          format::TrackType type, uint32_t* track_out) {
  const auto track_id = static_cast<uint32_t>(tracks_.size() + 1);
  format::TrackEntry t{};
  t.track_id = track_id;
  t.type = static_cast<uint8_t>(type);
  t.tid = tid;
  t.name_id = name_id;
  tracks_.push_back(t);
  if (track_out != nullptr) *track_out = track_id;
  if (allocated_ + buffer_bytes > budget_) {
    // Spend what is left on a smaller buffer rather than none at all.
    size_t left = budget_ - allocated_;
    buffer_bytes = 64u << 10;
    while (buffer_bytes * 2 <= left) buffer_bytes *= 2;
    if (buffer_bytes > left) return nullptr;
  }
  buffers_.push_back(std::make_unique<ThreadBuffer>(track_id, buffer_bytes));
  allocated_ += buffer_bytes;
  return buffers_.back().get();
}

void Registry::rename_track(uint32_t track_id, std::string_view name) {
  const uint32_t name_id = intern(name);
  std::lock_guard lock(mu_);
  if (track_id == 0 || track_id > tracks_.size()) return;
  tracks_[track_id - 1].name_id = name_id;
  // Re-announced in the next tracks chunk; readers keep the last entry.
  try {
    if (renamed_flushed_ == renamed_.size()) {  // all flushed: cleared here, not by the flusher
      renamed_.clear();
      renamed_flushed_ = 0;
    }
    renamed_.push_back(tracks_[track_id - 1]);
  } catch (...) {
    alloc_failed_.store(true);
  }
}

std::atomic<uint64_t>* Registry::unbuffered_counter(uint32_t track_id) {
  std::lock_guard lock(mu_);
  try {
    auto& slot = unbuffered_by_track_[track_id];
    if (slot == nullptr) slot = &unbuffered_counters_.emplace_back(0);
    return slot;
  } catch (...) {
    return nullptr;
  }
}

bool Registry::take_new_strings(PageVec<uint8_t>& out) {
  std::lock_guard lock(mu_);
  out.clear();
  for (; strings_flushed_ < names_.size(); ++strings_flushed_) {
    std::string_view s = names_[strings_flushed_];
    format::StringEntry e{static_cast<uint32_t>(strings_flushed_ + 1),
                          static_cast<uint32_t>(s.size())};
    size_t at = out.size();
    if (!out.resize(at + sizeof e + format::pad8(e.bytes), 0)) return false;
    std::memcpy(out.data() + at, &e, sizeof e);
    std::memcpy(out.data() + at + sizeof e, s.data(), s.size());
  }
  return true;
}

bool Registry::take_new_tracks(PageVec<uint8_t>& out) {
  std::lock_guard lock(mu_);
  out.clear();
  const size_t fresh = tracks_.size() - tracks_flushed_;
  const size_t renamed = renamed_.size() - renamed_flushed_;
  if (!out.reserve((fresh + renamed) * sizeof(format::TrackEntry))) return false;
  out.append(reinterpret_cast<const uint8_t*>(tracks_.data() + tracks_flushed_),
             fresh * sizeof(format::TrackEntry));
  out.append(reinterpret_cast<const uint8_t*>(renamed_.data() + renamed_flushed_),
             renamed * sizeof(format::TrackEntry));
  tracks_flushed_ = tracks_.size();
  // Kept (cleared by the thread that renames next): the flusher frees nothing.
  renamed_flushed_ = renamed_.size();
  return true;
}

namespace {

std::vector<uint8_t> to_vector(bool ok, const PageVec<uint8_t>& v) {
  if (!ok) throw std::bad_alloc();
  return std::vector<uint8_t>(v.begin(), v.end());
}

}  // namespace

std::vector<uint8_t> Registry::take_new_strings() {
  PageVec<uint8_t> out;
  const bool ok = take_new_strings(out);
  return to_vector(ok, out);
}

std::vector<uint8_t> Registry::take_new_tracks() {
  PageVec<uint8_t> out;
  const bool ok = take_new_tracks(out);
  return to_vector(ok, out);
}

bool Registry::buffers(PageVec<ThreadBuffer*>& out) {
  std::lock_guard lock(mu_);
  out.clear();
  if (!out.reserve(buffers_.size())) return false;
  for (auto& b : buffers_) out.push_back(b.get());
  return true;
}

bool Registry::any_buffer_past(size_t parts) {
  std::lock_guard lock(mu_);
  for (const auto& b : buffers_)
    if (b->pending_bytes() * parts > b->capacity()) return true;
  return false;
}

bool Registry::collect_retired() {
  std::lock_guard lock(mu_);
  bool ok = true;
  std::erase_if(buffers_, [this, &ok](const std::unique_ptr<ThreadBuffer>& b) {
    if (!b->retired() || b->pending_bytes() != 0) return false;
    // Its totals must survive the buffer.
    if (retired_drops_.size() <= b->track_id() && !retired_drops_.resize(b->track_id() + 1, 0)) {
      ok = false;
      return false;
    }
    retired_drops_[b->track_id()] += b->dropped();
    allocated_ -= b->capacity();
    return true;
  });
  return ok;
}

std::vector<Registry::Totals> Registry::totals() {
  std::lock_guard lock(mu_);
  std::vector<Totals> out;
  for (const auto& t : tracks_) {
    uint64_t dropped = t.track_id < retired_drops_.size() ? retired_drops_[t.track_id] : 0;
    if (auto it = unbuffered_by_track_.find(t.track_id); it != unbuffered_by_track_.end())
      dropped += it->second->load(std::memory_order_relaxed);
    for (auto& b : buffers_)
      if (b->track_id() == t.track_id) dropped += b->dropped();
    out.push_back({t.track_id, dropped});
  }
  return out;
}

void Registry::adopt_names_after_fork(const Registry& parent) {
  // Single-threaded (fork child); the parent's mutex may be held forever.
  ids_ = parent.ids_;
  names_.assign(parent.names_.size(), std::string_view());
  for (const auto& [name, id] : ids_) names_[id - 1] = name;
  strings_flushed_ = 0;
}

}  // namespace stallscope::detail
