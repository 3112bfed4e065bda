// Conversion of one file's decoded records (reader::Event) into the
// analyzer's compact events on the rank's tracks and names; and progress
// reporting over a set of files.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "scope.hpp"
#include "stallscope/analyzer/model.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::analyzer {

class FileConverter {
 public:
  // Adds the file's tracks to the scope's rank (process index `proc`).
  FileConverter(const reader::TraceReader& r, RankScope& scope, uint32_t proc);
  // The converted event; valid until the next call. Inline: it runs once
  // per event of the trace, from the input loop.
  const Ev& convert(const reader::RecordView& e);

 private:
  static constexpr uint32_t kDenseTracks = 1u << 16;
  static constexpr uint32_t kMaxStringIds = 1u << 20;  // memoized densely below this
  uint32_t track_of(uint32_t file_track) {
    if (file_track < dense_.size() && dense_[file_track] != 0) return dense_[file_track] - 1;
    return add_track(file_track);
  }
  uint32_t add_track(uint32_t file_track);  // first sight of a track, or a sparse id
  uint32_t name_of(uint32_t file_name) {  // every API call and sync asks
    if (file_name < names_.size() && names_[file_name] != 0) return names_[file_name] - 1;
    return add_name(file_name);
  }
  uint32_t add_name(uint32_t file_name);  // first sight of a name, or an id past kMaxStringIds
  uint32_t file_of(uint32_t file_name) {
    if (file_name < files_.size() && files_[file_name] != 0) return files_[file_name] - 1;
    return add_file(file_name);
  }
  uint32_t add_file(uint32_t file_name);
  // The payloads, by kind (convert.cpp: the kinds of fewer events).
  void read_io(const reader::RecordView& e, StorageRead& io);
  void read_work(const reader::RecordView& e, Kind kind, Work& w);
  void convert_rest(const reader::RecordView& e, Ev& v);
  void read_collective(const reader::RecordView& e, Collective& c);
  void read_sample(const reader::RecordView& e, SampleSpan& x);
  void read_loader(const reader::RecordView& e, LoaderConfig& x);
  void read_handoff(const reader::RecordView& e, BatchHandoff& x);
  void read_channel(const reader::RecordView& e, ChannelHandoff& x);
  void read_stack(const reader::RecordView& e, StackSample& x);

  const reader::TraceReader& r_;
  RankScope& scope_;
  uint32_t proc_;
  std::vector<uint32_t> dense_;  // small file track id -> rank track + 1 (0 = not yet)
  std::unordered_map<uint32_t, uint32_t> tracks_;  // the others
  std::vector<uint32_t> names_;  // file string id -> rank name id + 1 (0 = not yet)
  std::vector<uint32_t> files_;  // file string id -> rank file id + 1 (0 = not yet)
  Ev ev_;
};

inline const Ev& FileConverter::convert(const reader::RecordView& e) {
  using C = format::CoreRecord;
  // Each field is loaded from the record in place; the payload is zeroed
  // (48 bytes) and the kind's own fields set.
  Ev& v = ev_;
  v.kind = static_cast<Kind>(e.kind);
  v.phase = e.phase;
  v.emulated = (e.flags & format::kEmulated) != 0;
  v.track = track_of(e.track_id);
  v.name = 0;
  v.start = e.ts_ns;
  v.end = e.ts_ns + e.dur_ns;
  v.corr = e.core_field<uint64_t>(offsetof(C, corr));
  v.clear_payload();
  switch (v.kind) {
    case Kind::kApiCall: case Kind::kSync:  // named: host gaps name the call
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));
      break;
    case Kind::kStorageRead:
      if (e.has(format::Ext::kIo)) read_io(e, v.io());
      break;
    case Kind::kPreprocess: case Kind::kDataWait: case Kind::kBatchReady:
      if (e.has(format::Ext::kWork)) read_work(e, v.kind, v.work());
      break;
    case Kind::kStep: case Kind::kMark: case Kind::kRange: case Kind::kCounter: case Kind::kGap:
    case Kind::kH2D: case Kind::kD2H: case Kind::kD2D: case Kind::kMemset: case Kind::kCollective:
    case Kind::kSample: case Kind::kLoaderConfig: case Kind::kBatchHandoff:
    case Kind::kChannelHandoff: case Kind::kStackSample:
      convert_rest(e, v);  // kinds of fewer events, out of line
      break;
    default: break;
  }
  return v;
}

inline void FileConverter::read_io(const reader::RecordView& e, StorageRead& io) {
  using format::Ext;
  using X = format::IoExt;
  io.bytes = e.ext_field<uint64_t>(Ext::kIo, offsetof(X, bytes));
  io.hit_bytes = e.ext_field<uint64_t>(Ext::kIo, offsetof(X, hit_bytes));
  io.queued_ns = e.ext_field<uint64_t>(Ext::kIo, offsetof(X, queued_ns));
  io.sample = e.ext_field<uint64_t>(Ext::kIo, offsetof(X, sample_id));
  io.tier = static_cast<format::Tier>(std::min<uint8_t>(e.ext_field<uint8_t>(Ext::kIo, offsetof(X, tier)), 3));
  // A state past the known ones is a classified miss.
  const auto cache = e.ext_field<uint8_t>(Ext::kIo, offsetof(X, cache));
  io.cache = cache <= 3 ? static_cast<format::Cache>(cache) : format::Cache::kMiss;
  io.cache_method = static_cast<format::CacheMethod>(e.ext_field<uint8_t>(Ext::kIo, offsetof(X, cache_method)));
  io.queue_depth = e.ext_field<uint16_t>(Ext::kIo, offsetof(X, queue_depth));
  io.file = file_of(e.ext_field<uint32_t>(Ext::kIo, offsetof(format::ExtHeader, aux)));
}

inline void FileConverter::read_work(const reader::RecordView& e, Kind kind, Work& w) {
  using format::Ext;
  w.sample = e.ext_field<uint64_t>(Ext::kWork, offsetof(format::WorkExt, sample_id));
  w.batch = e.ext_field<uint64_t>(Ext::kWork, offsetof(format::WorkExt, batch_id));
  w.count = e.ext_field<uint32_t>(Ext::kWork, offsetof(format::WorkExt, count));
  // A preprocess item's worker index; a data wait's format::WaitSource.
  w.worker = kind != Kind::kBatchReady ? e.ext_field<uint32_t>(Ext::kWork, offsetof(format::ExtHeader, aux)) : 0;
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
