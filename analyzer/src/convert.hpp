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
  using format::Ext;
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
  // API calls and syncs keep their names: host gaps name the call.
  if (v.kind == Kind::kApiCall || v.kind == Kind::kSync)
    v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));
  switch (v.kind) {
    case Kind::kStep:
      if (e.has(Ext::kStep)) {
        v.corr = e.ext_field<uint64_t>(Ext::kStep, offsetof(format::StepExt, index));
        v.step().source = static_cast<format::StepSource>(
            e.ext_field<uint32_t>(Ext::kStep, offsetof(format::ExtHeader, aux)) & 0xff);
      }
      break;
    case Kind::kMark: v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id))); break;
    case Kind::kRange: case Kind::kCounter: {
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));
      const auto raw = e.core_field<uint64_t>(offsetof(C, value));
      if ((e.flags & format::kValueDouble) != 0) std::memcpy(&v.value(), &raw, sizeof raw);
      else v.value() = static_cast<double>(raw);
      break;
    }
    case Kind::kGap: v.corr = e.core_field<uint64_t>(offsetof(C, value)); break;
    case Kind::kStorageRead: {
      if (!e.has(Ext::kIo)) break;
      StorageRead& io = v.io();
      io.bytes = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, bytes));
      io.hit_bytes = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, hit_bytes));
      io.queued_ns = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, queued_ns));
      io.sample = e.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, sample_id));
      io.tier = static_cast<format::Tier>(
          std::min<uint8_t>(e.ext_field<uint8_t>(Ext::kIo, offsetof(format::IoExt, tier)), 3));
      {  // a state past the known ones is a classified miss
        const auto cache = e.ext_field<uint8_t>(Ext::kIo, offsetof(format::IoExt, cache));
        io.cache = cache <= 3 ? static_cast<format::Cache>(cache) : format::Cache::kMiss;
      }
      io.cache_method = static_cast<format::CacheMethod>(
          e.ext_field<uint8_t>(Ext::kIo, offsetof(format::IoExt, cache_method)));
      io.queue_depth = e.ext_field<uint16_t>(Ext::kIo, offsetof(format::IoExt, queue_depth));
      io.file = file_of(e.ext_field<uint32_t>(Ext::kIo, offsetof(format::ExtHeader, aux)));
      break;
    }
    case Kind::kPreprocess: case Kind::kDataWait: case Kind::kBatchReady: {
      if (!e.has(Ext::kWork)) break;
      Work& w = v.work();
      w.sample = e.ext_field<uint64_t>(Ext::kWork, offsetof(format::WorkExt, sample_id));
      w.batch = e.ext_field<uint64_t>(Ext::kWork, offsetof(format::WorkExt, batch_id));
      w.count = e.ext_field<uint32_t>(Ext::kWork, offsetof(format::WorkExt, count));
      // A preprocess item's worker index; a data wait's format::WaitSource.
      w.worker = v.kind != Kind::kBatchReady
                     ? e.ext_field<uint32_t>(Ext::kWork, offsetof(format::ExtHeader, aux))
                     : 0;
      break;
    }
    case Kind::kH2D: case Kind::kD2H: case Kind::kD2D: case Kind::kMemset: {
      if (!e.has(Ext::kCopy)) break;
      Copy& c = v.copy();
      c.bytes = e.ext_field<uint64_t>(Ext::kCopy, offsetof(format::CopyExt, bytes));
      c.src = static_cast<format::MemKind>(e.ext_field<uint8_t>(Ext::kCopy, offsetof(format::CopyExt, src)));
      c.dst = static_cast<format::MemKind>(e.ext_field<uint8_t>(Ext::kCopy, offsetof(format::CopyExt, dst)));
      break;
    }
    case Kind::kCollective: {
      if (!e.has(Ext::kCollective)) break;
      Collective& c = v.coll();
      c.bytes = e.ext_field<uint64_t>(Ext::kCollective, offsetof(format::CollectiveExt, bytes));
      // identity of the instance across ranks
      c.comm = e.ext_field<uint64_t>(Ext::kCollective, offsetof(format::CollectiveExt, comm_id));
      c.seq = e.ext_field<uint64_t>(Ext::kCollective, offsetof(format::CollectiveExt, seq));
      c.op = static_cast<format::CollOp>(
          e.ext_field<uint32_t>(Ext::kCollective, offsetof(format::ExtHeader, aux)) & 0xff);
      c.nranks = e.ext_field<uint32_t>(Ext::kCollective, offsetof(format::CollectiveExt, nranks));
      const auto flags =
          e.ext_field<uint32_t>(Ext::kCollective, offsetof(format::CollectiveExt, flags));
      c.enqueued = (flags & format::kCollEnqueued) != 0;
      c.join_only = c.enqueued && (flags & format::kCollJoinOnly) != 0;
      break;
    }
    case Kind::kSample: {
      if (!e.has(Ext::kSample)) break;
      using X = format::SampleExt;
      SampleSpan& x = v.sample();
      x.loader = e.ext_field<uint64_t>(Ext::kSample, offsetof(X, loader_id));
      x.batch = e.ext_field<uint64_t>(Ext::kSample, offsetof(X, batch_index));
      x.index = e.ext_field<uint64_t>(Ext::kSample, offsetof(X, sample_index));
      x.generation = e.ext_field<uint32_t>(Ext::kSample, offsetof(X, generation));
      x.worker = e.ext_field<int32_t>(Ext::kSample, offsetof(X, worker));
      x.count = e.ext_field<uint32_t>(Ext::kSample, offsetof(X, count));
      x.part = static_cast<format::SamplePart>(e.ext_field<uint8_t>(Ext::kSample, offsetof(X, part)));
      break;
    }
    case Kind::kLoaderConfig: {
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));  // the dataset's class
      if (!e.has(Ext::kLoaderConfig)) break;
      using X = format::LoaderConfigExt;
      constexpr Ext k = Ext::kLoaderConfig;
      LoaderConfig& x = v.loader();
      x.loader = e.ext_field<uint64_t>(k, offsetof(X, loader_id));
      x.dataset_len = e.ext_field<uint64_t>(k, offsetof(X, dataset_len));
      x.generation = e.ext_field<uint32_t>(k, offsetof(X, generation));
      x.num_workers = static_cast<uint16_t>(
          std::min<uint32_t>(e.ext_field<uint32_t>(k, offsetof(X, num_workers)), 0xffff));
      x.prefetch_factor = static_cast<uint16_t>(
          std::min<uint32_t>(e.ext_field<uint32_t>(k, offsetof(X, prefetch_factor)), 0xffff));
      x.batch_size = e.ext_field<uint32_t>(k, offsetof(X, batch_size));
      x.site = name_of(e.ext_field<uint32_t>(k, offsetof(X, site_name)));
      x.sampler = name_of(e.ext_field<uint32_t>(k, offsetof(X, sampler_name)));
      x.batch_sampler = name_of(e.ext_field<uint32_t>(k, offsetof(X, batch_sampler_name)));
      x.collate = name_of(e.ext_field<uint32_t>(k, offsetof(format::ExtHeader, aux)));
      x.pin_memory = static_cast<format::PinMemory>(e.ext_field<uint8_t>(k, offsetof(X, pin_memory)));
      x.persistent_workers = e.ext_field<uint8_t>(k, offsetof(X, persistent_workers)) != 0;
      x.drop_last = e.ext_field<uint8_t>(k, offsetof(X, drop_last)) != 0;
      x.in_order = e.ext_field<uint8_t>(k, offsetof(X, in_order)) != 0;
      x.mp_context = static_cast<format::MpContext>(e.ext_field<uint8_t>(k, offsetof(X, mp_context)));
      x.dataset_kind =
          static_cast<format::DatasetKind>(e.ext_field<uint8_t>(k, offsetof(X, dataset_kind)));
      {
        const auto flags = e.ext_field<uint8_t>(k, offsetof(X, flags));
        x.getitems = (flags & format::kLoaderGetItems) != 0;
        x.overridden = (flags & format::kLoaderOverridden) != 0;
      }
      break;
    }
    case Kind::kBatchHandoff: {
      if (!e.has(Ext::kBatchHandoff)) break;
      using X = format::BatchHandoffExt;
      BatchHandoff& x = v.handoff();
      x.loader = e.ext_field<uint64_t>(Ext::kBatchHandoff, offsetof(X, loader_id));
      x.batch = e.ext_field<uint64_t>(Ext::kBatchHandoff, offsetof(X, batch_index));
      x.asked_ns = e.requested_ns;
      x.generation = e.ext_field<uint32_t>(Ext::kBatchHandoff, offsetof(X, generation));
      x.worker = e.ext_field<int32_t>(Ext::kBatchHandoff, offsetof(X, worker));
      x.worker_pid = e.ext_field<uint32_t>(Ext::kBatchHandoff, offsetof(X, worker_pid));
      break;
    }
    case Kind::kChannelHandoff: {
      if (!e.has(Ext::kChannelHandoff)) break;
      using X = format::ChannelHandoffExt;
      constexpr Ext k = Ext::kChannelHandoff;
      ChannelHandoff& x = v.channel();
      x.channel = e.ext_field<uint64_t>(k, offsetof(X, channel_id));
      x.object = e.ext_field<uint64_t>(k, offsetof(X, object_id));
      x.bytes = e.ext_field<uint64_t>(k, offsetof(X, bytes));
      x.asked_ns = e.requested_ns;
      x.producer_pid = e.ext_field<uint32_t>(k, offsetof(X, producer_pid));
      x.producer_tid = e.ext_field<uint32_t>(k, offsetof(X, producer_tid));
      x.parts = e.ext_field<uint32_t>(k, offsetof(X, parts));
      x.type = static_cast<format::ChannelType>(e.ext_field<uint8_t>(k, offsetof(X, channel_type)));
      break;
    }
    case Kind::kStackSample: {
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));  // the innermost frame
      if (!e.has(Ext::kStackSample)) break;
      using X = format::StackSampleExt;
      StackSample& x = v.stack();
      x.interval_ns = e.ext_field<uint64_t>(Ext::kStackSample, offsetof(X, interval_ns));
      x.tid = e.ext_field<uint32_t>(Ext::kStackSample, offsetof(X, tid));
      x.cost_ns = e.ext_field<uint32_t>(Ext::kStackSample, offsetof(X, cost_ns));
      x.frames = e.ext_field<uint16_t>(Ext::kStackSample, offsetof(X, frame_count));
      x.on_cpu = static_cast<format::OnCpu>(e.ext_field<uint8_t>(Ext::kStackSample, offsetof(X, on_cpu)));
      x.flags = e.ext_field<uint8_t>(Ext::kStackSample, offsetof(X, flags));
      break;
    }
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
