// Conversion of one file's decoded records (reader::Event) into the
// analyzer's compact events on the rank's tracks and names; and progress
// reporting over a set of files.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::analyzer {

class FileConverter {
 public:
  // Adds the file's tracks to `rank` (process index `proc`).
  FileConverter(const reader::TraceReader& r, RankTrace& rank, uint32_t proc);
  // The converted event; valid until the next call. Inline: it runs once
  // per event of the trace, from the input loop.
  const Ev& convert(const reader::RecordView& e);

 private:
  static constexpr uint32_t kDenseTracks = 1u << 16;
  uint32_t track_of(uint32_t file_track) {
    if (file_track < dense_.size() && dense_[file_track] != 0) return dense_[file_track] - 1;
    return add_track(file_track);
  }
  uint32_t add_track(uint32_t file_track);  // first sight of a track, or a sparse id
  uint32_t name_of(uint32_t file_name);

  const reader::TraceReader& r_;
  RankTrace& rank_;
  uint32_t proc_;
  std::vector<uint32_t> dense_;  // small file track id -> rank track + 1 (0 = not yet)
  std::unordered_map<uint32_t, uint32_t> tracks_;  // the others
  std::unordered_map<uint32_t, uint32_t> by_tid_;  // thread tid -> rank track
  std::vector<uint32_t> names_;  // file string id -> rank name id + 1 (0 = not yet)
  std::unordered_map<std::string, uint32_t> interned_;
  Ev ev_;
};

static_assert(sizeof(Ev) == 112, "convert() assigns every field of Ev: update it with Ev");

inline const Ev& FileConverter::convert(const reader::RecordView& e) {
  using format::Ext;
  using C = format::CoreRecord;
  // Every field is assigned (no `v = Ev{}`: zeroing the whole struct per
  // event through `rep stos` cost more than the rest of the conversion),
  // each loaded from the record in place.
  Ev& v = ev_;
  v.kind = static_cast<Kind>(e.kind);
  v.phase = e.phase;
  v.emulated = (e.flags & format::kEmulated) != 0;
  v.tier = v.cache = v.src = v.dst = v.cache_method = 0;
  v.queue_depth = 0;
  v.enqueued = v.join_only = false;
  v.track = track_of(e.track_id);
  v.name = v.worker = v.count = 0;
  v.start = e.ts_ns;
  v.end = e.ts_ns + e.dur_ns;
  v.corr = e.core_field<uint64_t>(offsetof(C, corr));
  v.sample_id = v.batch_id = v.bytes = v.queued_ns = v.file = 0;
  v.value = 0;
  v.ids_at = v.ids_n = 0;
  switch (v.kind) {
    case Kind::kStep:
      if (e.has(Ext::kStep))
        v.corr = e.ext_field<uint64_t>(Ext::kStep, offsetof(format::StepExt, index));
      break;
    case Kind::kRange: case Kind::kCounter: {
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));
      const auto raw = e.core_field<uint64_t>(offsetof(C, value));
      if ((e.flags & format::kValueDouble) != 0) std::memcpy(&v.value, &raw, sizeof raw);
      else v.value = static_cast<double>(raw);
      break;
    }
    case Kind::kGap: v.corr = e.core_field<uint64_t>(offsetof(C, value)); break;
    case Kind::kStorageRead:
      if (!e.has(Ext::kIo)) break;
      v.bytes = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, bytes));
      v.queued_ns = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, queued_ns));
      v.sample_id = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, sample_id));
      v.tier = e.ext_field<uint8_t>(Ext::kIo, offsetof(format::IoExt, tier));
      v.cache = e.ext_field<uint8_t>(Ext::kIo, offsetof(format::IoExt, cache));
      v.cache_method = e.ext_field<uint8_t>(Ext::kIo, offsetof(format::IoExt, cache_method));
      v.queue_depth = e.ext_field<uint16_t>(Ext::kIo, offsetof(format::IoExt, queue_depth));
      v.file = e.ext_field<uint32_t>(Ext::kIo, offsetof(format::ExtHeader, aux));
      break;
    case Kind::kPreprocess: case Kind::kDataWait: case Kind::kBatchReady:
      if (!e.has(Ext::kWork)) break;
      v.sample_id = e.ext_field<uint64_t>(Ext::kWork, offsetof(format::WorkExt, sample_id));
      v.batch_id = e.ext_field<uint64_t>(Ext::kWork, offsetof(format::WorkExt, batch_id));
      v.count = e.ext_field<uint32_t>(Ext::kWork, offsetof(format::WorkExt, count));
      v.worker = v.kind == Kind::kPreprocess
                     ? e.ext_field<uint32_t>(Ext::kWork, offsetof(format::ExtHeader, aux))
                     : 0;
      break;
    case Kind::kH2D: case Kind::kD2H: case Kind::kD2D: case Kind::kMemset:
      if (!e.has(Ext::kCopy)) break;
      v.bytes = e.ext_field<uint64_t>(Ext::kCopy, offsetof(format::CopyExt, bytes));
      v.src = e.ext_field<uint8_t>(Ext::kCopy, offsetof(format::CopyExt, src));
      v.dst = e.ext_field<uint8_t>(Ext::kCopy, offsetof(format::CopyExt, dst));
      break;
    case Kind::kCollective:
      if (!e.has(Ext::kCollective)) break;
      v.bytes = e.ext_field<uint64_t>(Ext::kCollective, offsetof(format::CollectiveExt, bytes));
      // identity of the instance across ranks
      v.sample_id =
          e.ext_field<uint64_t>(Ext::kCollective, offsetof(format::CollectiveExt, comm_id));
      v.batch_id = e.ext_field<uint64_t>(Ext::kCollective, offsetof(format::CollectiveExt, seq));
      v.worker = e.ext_field<uint32_t>(Ext::kCollective, offsetof(format::ExtHeader, aux)) & 0xff;
      v.count = e.ext_field<uint32_t>(Ext::kCollective, offsetof(format::CollectiveExt, nranks));
      {
        const auto flags =
            e.ext_field<uint32_t>(Ext::kCollective, offsetof(format::CollectiveExt, flags));
        v.enqueued = (flags & format::kCollEnqueued) != 0;
        v.join_only = v.enqueued && (flags & format::kCollJoinOnly) != 0;
      }
      break;
    default: break;
  }
  return v;
}

// Bytes read so far over all files, reported to `fn` every few MiB. Safe to
// tick from several threads (ranks analyzed in parallel): the count is
// under a lock, taken only when there is someone to tell.
class Progress {
 public:
  Progress(std::function<void(uint64_t, uint64_t)> fn,
           const std::vector<std::unique_ptr<reader::TraceReader>>& readers);
  // `r` has reached byte `offset`.
  void tick(const reader::TraceReader& r, uint64_t offset) const;
  // Everything is read: reports (total, total) once, unless a tick already
  // did or there were no bytes at all.
  void finish() const;

 private:
  std::function<void(uint64_t, uint64_t)> fn_;
  uint64_t total_ = 0;
  mutable std::mutex mu_;
  mutable uint64_t done_ = 0, last_report_ = 0;
  mutable std::unordered_map<const reader::TraceReader*, uint64_t> at_;
};

}  // namespace stallscope::analyzer
