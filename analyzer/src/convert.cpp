#include "convert.hpp"

namespace stallscope::analyzer {

namespace {
constexpr uint64_t kReportEvery = 64u << 20;  // bytes
}  // namespace

FileConverter::FileConverter(const reader::TraceReader& r, RankScope& scope, uint32_t proc)
    : r_(r), scope_(scope), proc_(proc) {
  for (const auto& t : r.tracks()) track_of(t.track_id);
}

uint32_t FileConverter::add_track(uint32_t file_track) {
  auto [it, fresh] = tracks_.try_emplace(file_track, 0);
  if (!fresh) return it->second;
  TrackDesc d;
  d.proc = proc_;
  if (const reader::TrackInfo* t = r_.track(file_track)) {
    d.type = t->type;
    d.tid = t->tid;
    d.device = t->device;
    d.name = std::string(r_.string(t->name_id));
  }
  const uint32_t rank_track = scope_.track(std::move(d));
  if (file_track < kDenseTracks) {
    if (file_track >= dense_.size()) dense_.resize(file_track + 1, 0);
    dense_[file_track] = rank_track + 1;
  }
  it->second = rank_track;
  return rank_track;
}

uint32_t FileConverter::add_name(uint32_t file_name) {
  if (file_name == 0 || file_name >= kMaxStringIds) return 0;
  if (file_name >= names_.size()) names_.resize(file_name + 1, 0);
  uint32_t& slot = names_[file_name];
  if (slot == 0) slot = scope_.name(r_.string(file_name)) + 1;
  return slot - 1;
}

// A path's string id past kMaxStringIds is looked up each time (a trace
// with over a million strings is rare; the scope's map answers).
uint32_t FileConverter::add_file(uint32_t file_name) {
  if (file_name == 0) return 0;
  const uint32_t id = scope_.file(r_.string(file_name));
  if (file_name < kMaxStringIds) {
    if (file_name >= files_.size()) files_.resize(file_name + 1, 0);
    files_[file_name] = id + 1;
  }
  return id;
}

// The kinds of fewer events than reads, work items and calls (convert()
// keeps those inline).
void FileConverter::convert_rest(const reader::RecordView& e, Ev& v) {
  using format::Ext;
  using C = format::CoreRecord;
  switch (v.kind) {
    case Kind::kStep:
      if (!e.has(Ext::kStep)) break;
      v.corr = e.ext_field<uint64_t>(Ext::kStep, offsetof(format::StepExt, index));
      v.step().source = static_cast<format::StepSource>(
          e.ext_field<uint32_t>(Ext::kStep, offsetof(format::ExtHeader, aux)) & 0xff);
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
    case Kind::kH2D: case Kind::kD2H: case Kind::kD2D: case Kind::kMemset: {
      if (!e.has(Ext::kCopy)) break;
      using X = format::CopyExt;
      Copy& c = v.copy();
      c.bytes = e.ext_field<uint64_t>(Ext::kCopy, offsetof(X, bytes));
      c.src = static_cast<format::MemKind>(e.ext_field<uint8_t>(Ext::kCopy, offsetof(X, src)));
      c.dst = static_cast<format::MemKind>(e.ext_field<uint8_t>(Ext::kCopy, offsetof(X, dst)));
      break;
    }
    case Kind::kCollective: if (e.has(Ext::kCollective)) read_collective(e, v.coll()); break;
    case Kind::kSample: if (e.has(Ext::kSample)) read_sample(e, v.sample()); break;
    case Kind::kLoaderConfig:
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));  // the dataset's class
      if (e.has(Ext::kLoaderConfig)) read_loader(e, v.loader());
      break;
    case Kind::kBatchHandoff: if (e.has(Ext::kBatchHandoff)) read_handoff(e, v.handoff()); break;
    case Kind::kChannelHandoff: if (e.has(Ext::kChannelHandoff)) read_channel(e, v.channel()); break;
    case Kind::kStackSample:
      v.name = name_of(e.core_field<uint32_t>(offsetof(C, name_id)));  // the innermost frame
      if (e.has(Ext::kStackSample)) read_stack(e, v.stack());
      break;
    default: break;
  }
}

void FileConverter::read_collective(const reader::RecordView& e, Collective& c) {
  constexpr format::Ext k = format::Ext::kCollective;
  using X = format::CollectiveExt;
  c.bytes = e.ext_field<uint64_t>(k, offsetof(X, bytes));
  // identity of the instance across ranks
  c.comm = e.ext_field<uint64_t>(k, offsetof(X, comm_id));
  c.seq = e.ext_field<uint64_t>(k, offsetof(X, seq));
  c.op = static_cast<format::CollOp>(e.ext_field<uint32_t>(k, offsetof(format::ExtHeader, aux)) & 0xff);
  c.nranks = e.ext_field<uint32_t>(k, offsetof(X, nranks));
  const auto flags = e.ext_field<uint32_t>(k, offsetof(X, flags));
  c.enqueued = (flags & format::kCollEnqueued) != 0;
  c.join_only = c.enqueued && (flags & format::kCollJoinOnly) != 0;
}

void FileConverter::read_sample(const reader::RecordView& e, SampleSpan& x) {
  constexpr format::Ext k = format::Ext::kSample;
  using X = format::SampleExt;
  x.loader = e.ext_field<uint64_t>(k, offsetof(X, loader_id));
  x.batch = e.ext_field<uint64_t>(k, offsetof(X, batch_index));
  x.index = e.ext_field<uint64_t>(k, offsetof(X, sample_index));
  x.generation = e.ext_field<uint32_t>(k, offsetof(X, generation));
  x.worker = e.ext_field<int32_t>(k, offsetof(X, worker));
  x.count = e.ext_field<uint32_t>(k, offsetof(X, count));
  x.part = static_cast<format::SamplePart>(e.ext_field<uint8_t>(k, offsetof(X, part)));
}

void FileConverter::read_loader(const reader::RecordView& e, LoaderConfig& x) {
  constexpr format::Ext k = format::Ext::kLoaderConfig;
  using X = format::LoaderConfigExt;
  const auto u16 = [&](size_t at) {
    return static_cast<uint16_t>(std::min<uint32_t>(e.ext_field<uint32_t>(k, at), 0xffff));
  };
  const auto flag = [&](size_t at) { return e.ext_field<uint8_t>(k, at) != 0; };
  x.loader = e.ext_field<uint64_t>(k, offsetof(X, loader_id));
  x.dataset_len = e.ext_field<uint64_t>(k, offsetof(X, dataset_len));
  x.generation = e.ext_field<uint32_t>(k, offsetof(X, generation));
  x.num_workers = u16(offsetof(X, num_workers));
  x.prefetch_factor = u16(offsetof(X, prefetch_factor));
  x.batch_size = e.ext_field<uint32_t>(k, offsetof(X, batch_size));
  x.site = name_of(e.ext_field<uint32_t>(k, offsetof(X, site_name)));
  x.sampler = name_of(e.ext_field<uint32_t>(k, offsetof(X, sampler_name)));
  x.batch_sampler = name_of(e.ext_field<uint32_t>(k, offsetof(X, batch_sampler_name)));
  x.collate = name_of(e.ext_field<uint32_t>(k, offsetof(format::ExtHeader, aux)));
  x.pin_memory = static_cast<format::PinMemory>(e.ext_field<uint8_t>(k, offsetof(X, pin_memory)));
  x.persistent_workers = flag(offsetof(X, persistent_workers));
  x.drop_last = flag(offsetof(X, drop_last));
  x.in_order = flag(offsetof(X, in_order));
  x.mp_context = static_cast<format::MpContext>(e.ext_field<uint8_t>(k, offsetof(X, mp_context)));
  x.dataset_kind = static_cast<format::DatasetKind>(e.ext_field<uint8_t>(k, offsetof(X, dataset_kind)));
  const auto flags = e.ext_field<uint8_t>(k, offsetof(X, flags));
  x.getitems = (flags & format::kLoaderGetItems) != 0;
  x.overridden = (flags & format::kLoaderOverridden) != 0;
}

void FileConverter::read_handoff(const reader::RecordView& e, BatchHandoff& x) {
  constexpr format::Ext k = format::Ext::kBatchHandoff;
  using X = format::BatchHandoffExt;
  x.loader = e.ext_field<uint64_t>(k, offsetof(X, loader_id));
  x.batch = e.ext_field<uint64_t>(k, offsetof(X, batch_index));
  x.asked_ns = e.requested_ns;
  x.generation = e.ext_field<uint32_t>(k, offsetof(X, generation));
  x.worker = e.ext_field<int32_t>(k, offsetof(X, worker));
  x.worker_pid = e.ext_field<uint32_t>(k, offsetof(X, worker_pid));
}

void FileConverter::read_channel(const reader::RecordView& e, ChannelHandoff& x) {
  constexpr format::Ext k = format::Ext::kChannelHandoff;
  using X = format::ChannelHandoffExt;
  x.channel = e.ext_field<uint64_t>(k, offsetof(X, channel_id));
  x.object = e.ext_field<uint64_t>(k, offsetof(X, object_id));
  x.bytes = e.ext_field<uint64_t>(k, offsetof(X, bytes));
  x.asked_ns = e.requested_ns;
  x.producer_pid = e.ext_field<uint32_t>(k, offsetof(X, producer_pid));
  x.producer_tid = e.ext_field<uint32_t>(k, offsetof(X, producer_tid));
  x.parts = e.ext_field<uint32_t>(k, offsetof(X, parts));
  x.type = static_cast<format::ChannelType>(e.ext_field<uint8_t>(k, offsetof(X, channel_type)));
}

void FileConverter::read_stack(const reader::RecordView& e, StackSample& x) {
  constexpr format::Ext k = format::Ext::kStackSample;
  using X = format::StackSampleExt;
  x.interval_ns = e.ext_field<uint64_t>(k, offsetof(X, interval_ns));
  x.tid = e.ext_field<uint32_t>(k, offsetof(X, tid));
  x.cost_ns = e.ext_field<uint32_t>(k, offsetof(X, cost_ns));
  x.frames = e.ext_field<uint16_t>(k, offsetof(X, frame_count));
  x.on_cpu = static_cast<format::OnCpu>(e.ext_field<uint8_t>(k, offsetof(X, on_cpu)));
  x.flags = e.ext_field<uint8_t>(k, offsetof(X, flags));
}

Progress::Progress(std::function<void(uint64_t, uint64_t)> fn,
                   const std::vector<std::unique_ptr<reader::TraceReader>>& readers)
    : fn_(std::move(fn)) {
  for (const auto& r : readers) total_ += r->file_bytes();
}

void Progress::tick(const reader::TraceReader& r, uint64_t offset) const {
  if (!fn_) return;
  std::lock_guard lock(mu_);
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

void Progress::finish() const {
  if (!fn_ || total_ == 0) return;  // nothing was read: nothing to say
  std::lock_guard lock(mu_);
  if (last_report_ >= total_) return;  // already said
  done_ = last_report_ = total_;
  fn_(total_, total_);
}

}  // namespace stallscope::analyzer
