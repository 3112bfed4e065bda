#include "convert.hpp"

namespace stallscope::analyzer {

namespace {
constexpr uint32_t kMaxNameIds = 1u << 20;
constexpr uint64_t kReportEvery = 64u << 20;  // bytes
constexpr uint32_t kDenseTracks = 1u << 16;
}  // namespace

FileConverter::FileConverter(const reader::TraceReader& r, RankTrace& rank, uint32_t proc)
    : r_(r), rank_(rank), proc_(proc) {
  for (size_t i = 0; i < rank_.names.size(); ++i) interned_[rank_.names[i]] = static_cast<uint32_t>(i);
  for (const auto& t : r.tracks()) track_of(t.track_id);
}

uint32_t FileConverter::track_of(uint32_t file_track) {
  if (file_track < dense_.size() && dense_[file_track] != 0) return dense_[file_track] - 1;
  auto [it, fresh] = tracks_.try_emplace(file_track, 0);
  if (!fresh) return it->second;
  const auto rank_track = static_cast<uint32_t>(rank_.tracks.size());
  if (file_track < kDenseTracks) {
    if (file_track >= dense_.size()) dense_.resize(file_track + 1, 0);
    dense_[file_track] = rank_track + 1;
  }
  TrackDesc d;
  d.proc = proc_;
  if (const reader::TrackInfo* t = r_.track(file_track)) {
    d.type = t->type;
    d.tid = t->tid;
    d.device = t->device;
    d.name = std::string(r_.string(t->name_id));
  }
  it->second = rank_track;
  rank_.tracks.push_back(std::move(d));
  return it->second;
}

uint32_t FileConverter::name_of(uint32_t file_name) {
  if (file_name == 0 || file_name >= kMaxNameIds) return 0;
  if (file_name >= names_.size()) names_.resize(file_name + 1, 0);
  uint32_t& slot = names_[file_name];
  if (slot != 0) return slot - 1;
  const std::string text(r_.string(file_name));
  auto [it, fresh] = interned_.try_emplace(text, static_cast<uint32_t>(rank_.names.size()));
  if (fresh) rank_.names.push_back(text);
  slot = it->second + 1;
  return it->second;
}

static_assert(sizeof(Ev) == 112, "convert() assigns every field of Ev: update it with Ev");

const Ev& FileConverter::convert(const reader::Event& e) {
  // Every field is assigned (no `v = Ev{}`: zeroing the whole struct per
  // event through `rep stos` cost more than the rest of the conversion).
  Ev& v = ev_;
  v.kind = static_cast<Kind>(e.kind);
  v.phase = e.phase;
  v.emulated = (e.flags & format::kEmulated) != 0;
  v.tier = v.cache = v.src = v.dst = 0;
  v.queue_depth = 0;
  v.track = track_of(e.track_id);
  v.name = v.worker = v.count = 0;
  v.start = e.ts_ns;
  v.end = e.ts_ns + e.dur_ns;
  v.corr = e.corr;
  v.sample_id = v.batch_id = v.bytes = v.queued_ns = v.file = 0;
  v.value = 0;
  v.ids_at = v.ids_n = 0;
  switch (v.kind) {
    case Kind::kStep:
      if (e.has(format::Ext::kStep)) v.corr = e.step.index;
      break;
    case Kind::kRange: case Kind::kCounter:
      v.name = name_of(e.name_id);
      v.value = e.number();
      break;
    case Kind::kGap: v.corr = e.value; break;
    case Kind::kStorageRead:
      if (!e.has(format::Ext::kIo)) break;  // (stale members otherwise)
      v.bytes = e.io.bytes;
      v.queued_ns = e.io.queued_ns;
      v.sample_id = e.io.sample_id;
      v.tier = e.io.tier;
      v.cache = e.io.cache;
      v.queue_depth = e.io.queue_depth;
      v.file = e.io.h.aux;
      break;
    case Kind::kPreprocess: case Kind::kDataWait: case Kind::kBatchReady:
      if (!e.has(format::Ext::kWork)) break;
      v.sample_id = e.work.sample_id;
      v.batch_id = e.work.batch_id;
      v.count = e.work.count;
      v.worker = v.kind == Kind::kPreprocess ? e.work.h.aux : 0;
      break;
    case Kind::kH2D: case Kind::kD2H: case Kind::kD2D: case Kind::kMemset:
      if (!e.has(format::Ext::kCopy)) break;
      v.bytes = e.copy.bytes;
      v.src = e.copy.src;
      v.dst = e.copy.dst;
      break;
    case Kind::kCollective:
      if (!e.has(format::Ext::kCollective)) break;
      v.bytes = e.collective.bytes;
      v.sample_id = e.collective.comm_id;  // identity of the instance across ranks
      v.batch_id = e.collective.seq;
      break;
    default: break;
  }
  return v;
}

Progress::Progress(std::function<void(uint64_t, uint64_t)> fn,
                   const std::vector<std::unique_ptr<reader::TraceReader>>& readers)
    : fn_(std::move(fn)) {
  for (const auto& r : readers) total_ += r->file_bytes();
}

void Progress::tick(const reader::TraceReader& r, uint64_t offset) const {
  if (!fn_) return;
  uint64_t& at = at_[&r];
  if (offset > at) {
    done_ += offset - at;
    at = offset;
  }
  if (done_ - last_report_ >= kReportEvery || done_ >= total_) {
    last_report_ = done_;
    fn_(done_, total_);
  }
}

}  // namespace stallscope::analyzer
