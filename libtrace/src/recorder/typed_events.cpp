// The typed recorders of trace.hpp: each fills a core record and its
// extension records on the stack and hands them to emit() in one piece.
#include <algorithm>
#include <cstring>

#include "stallscope/internal/inline_records.hpp"
#include "recorder/recorder.hpp"
#include "stallscope/trace.hpp"

namespace stallscope {
namespace {

using namespace format;

template <typename E>
E ext_of(Ext type, uint32_t aux = 0) {
  E e{};
  e.h.type = static_cast<uint8_t>(type);
  e.h.bytes = static_cast<uint16_t>(sizeof(E));
  e.h.aux = aux;
  return e;
}

CoreRecord core_of(Kind kind, NameId name, Ticks start, Ticks end, uint64_t corr,
                   uint8_t flags = 0) {
  const bool instant = end == start && kind != Kind::kCounter;
  return CoreRecord{static_cast<uint8_t>(kind),
                    static_cast<uint8_t>(flags | (instant ? kInstant : kComplete)), 0, name,
                    start, end >= start ? end - start : 0, corr};
}

template <typename E>
bool emit_with(const CoreRecord& core, const E& ext) {
  return detail::emit_fixed<sizeof(E)>(core, &ext);
}

}  // namespace

bool record_step(uint64_t index, Ticks start, Ticks end, StepSource source) noexcept {
  auto e = ext_of<StepExt>(Ext::kStep, static_cast<uint32_t>(source));
  e.index = index;
  return emit_with(core_of(Kind::kStep, 0, start, end, index), e);
}

bool record_storage_read(Ticks start, Ticks end, const StorageRead& r) noexcept {
  return detail::emit_storage_read(start, end, r);
}

bool record_storage_read_for(uint32_t tid, Ticks start, Ticks end, const StorageRead& r) noexcept {
  if (!enabled()) return false;
  alignas(8) uint8_t rec[detail::kStorageReadBytes];
  detail::build_storage_read(rec, start, end, r);
  format::CoreRecord core;
  __builtin_memcpy(&core, rec, sizeof core);
  return detail::emit_for_thread(tid, core, rec + sizeof core, sizeof(format::IoExt));
}

bool record_preprocess(NameId name, Ticks start, Ticks end, const Work& w) noexcept {
  auto e = ext_of<WorkExt>(Ext::kWork, w.worker);
  e.sample_id = w.sample_id;
  e.batch_id = w.batch_id;
  e.count = w.count;
  return emit_with(core_of(Kind::kPreprocess, name, start, end, w.batch_id), e);
}

bool record_data_wait(Ticks start, Ticks end, uint64_t batch_id, WaitSource how) noexcept {
  auto e = ext_of<WorkExt>(Ext::kWork, static_cast<uint32_t>(how));
  e.batch_id = batch_id;
  return emit_with(core_of(Kind::kDataWait, 0, start, end, batch_id), e);
}

bool record_batch_ready(Ticks when, uint64_t batch_id, std::span<const uint64_t> ids) noexcept {
  if (!enabled()) return false;
  // One WorkExt, then the ids in id-list extensions of at most
  // kMaxIdsPerExt each, gathered straight from the caller's span.
  constexpr size_t kMaxPieces = 8;
  if (ids.size() > kMaxPieces * kMaxIdsPerExt) ids = ids.first(kMaxPieces * kMaxIdsPerExt);
  auto w = ext_of<WorkExt>(Ext::kWork);
  w.batch_id = batch_id;
  w.count = static_cast<uint32_t>(ids.size());
  w.sample_id = ids.empty() ? 0 : ids.front();
  IdListExt headers[kMaxPieces];
  detail::ThreadBuffer::Piece pieces[1 + 2 * kMaxPieces];
  size_t n = 0;
  pieces[n++] = {&w, sizeof w};
  for (size_t i = 0, k = 0; i < ids.size(); i += kMaxIdsPerExt, ++k) {
    const size_t count = std::min<size_t>(kMaxIdsPerExt, ids.size() - i);
    headers[k] = IdListExt{};
    headers[k].h.type = static_cast<uint8_t>(Ext::kIdList);
    headers[k].h.bytes = static_cast<uint16_t>(sizeof(IdListExt) + 8 * count);
    headers[k].h.aux = static_cast<uint32_t>(count);
    pieces[n++] = {&headers[k], sizeof(IdListExt)};
    pieces[n++] = {ids.data() + i, 8 * count};
  }
  return detail::emit_pieces(core_of(Kind::kBatchReady, 0, when, when, batch_id), pieces, n);
}

bool record_api_call(Ticks start, Ticks end, const ApiCall& a) noexcept {
  auto e = ext_of<ApiExt>(Ext::kApi, a.cbid);
  e.domain = static_cast<uint8_t>(a.domain);
  e.result = a.result;
  return emit_with(core_of(Kind::kApiCall, a.name, start, end, a.corr), e);
}

bool record_copy(Ticks start, Ticks end, const Copy& c) noexcept {
  auto e = ext_of<CopyExt>(Ext::kCopy, c.stream);
  e.bytes = c.bytes;
  e.src = static_cast<uint8_t>(c.src);
  e.dst = static_cast<uint8_t>(c.dst);
  e.device = c.device;
  const uint8_t flags = c.emulated ? kEmulated : 0;
  return emit_with(core_of(c.kind, 0, start, end, c.corr, flags), e);
}

bool record_kernel(Ticks start, Ticks end, const DeviceWork& k) noexcept {
  auto e = ext_of<DeviceExt>(Ext::kDevice, k.stream);
  e.device = k.device;
  const uint8_t flags = k.emulated ? kEmulated : 0;
  return emit_with(core_of(Kind::kKernel, k.name, start, end, k.corr, flags), e);
}

bool record_sync(Ticks start, Ticks end, const DeviceWork& what, uint16_t sync_kind) noexcept {
  auto e = ext_of<DeviceExt>(Ext::kDevice, what.stream);
  e.device = what.device;
  e.sync_kind = sync_kind;
  return emit_with(core_of(Kind::kSync, what.name, start, end, what.corr), e);
}

bool record_collective(Ticks start, Ticks end, const Collective& c) noexcept {
  auto e = ext_of<CollectiveExt>(Ext::kCollective,
                                 static_cast<uint32_t>(c.op) | (uint32_t{c.dtype} << 8));
  e.bytes = c.bytes;
  e.comm_id = c.comm_id;
  e.seq = c.seq;
  e.rank = c.rank;
  e.nranks = c.nranks;
  e.peer = c.peer;
  e.flags = (c.enqueued ? format::kCollEnqueued : 0) | (c.join_only ? format::kCollJoinOnly : 0);
  const uint8_t flags = c.emulated ? kEmulated : 0;
  return emit_with(core_of(Kind::kCollective, c.name, start, end, c.corr, flags), e);
}

bool record_range(NameId name, Ticks start, Ticks end, NameId domain) noexcept {
  auto e = ext_of<RangeExt>(Ext::kRange, domain);
  return emit_with(core_of(Kind::kRange, name, start, end, 0), e);
}

bool record_counter(NameId name, double value, uint64_t subject) noexcept {
  if (!enabled()) return false;
  CoreRecord r{static_cast<uint8_t>(Kind::kCounter), uint8_t{kInstant} | uint8_t{kValueDouble}, 0, name,
               ticks_now(), 0, subject};
  std::memcpy(&r.value, &value, sizeof value);
  return detail::emit(r, nullptr, 0);
}

bool record_mark(NameId text) noexcept {
  if (!enabled()) return false;
  const Ticks t = ticks_now();
  return detail::emit(CoreRecord{static_cast<uint8_t>(Kind::kMark), kInstant, 0, text, t, 0, 0},
                      nullptr, 0);
}

bool record_sample(Ticks start, Ticks end, const Sample& s) noexcept {
  auto e = ext_of<SampleExt>(Ext::kSample);
  e.loader_id = s.loader_id;
  e.batch_index = s.batch_index;
  e.sample_index = s.sample_index;
  e.generation = s.generation;
  e.worker = s.worker;
  e.count = s.count;
  e.part = static_cast<uint8_t>(s.part);
  return emit_with(core_of(Kind::kSample, 0, start, end, s.batch_index), e);
}

bool record_loader_config(Ticks at, const LoaderConfig& c) noexcept {
  auto e = ext_of<LoaderConfigExt>(Ext::kLoaderConfig, c.collate_name);
  e.loader_id = c.loader_id;
  e.dataset_len = c.dataset_len;
  e.generation = c.generation;
  e.num_workers = c.num_workers;
  e.prefetch_factor = c.prefetch_factor;
  e.batch_size = c.batch_size;
  e.timeout_ms = c.timeout_ms;
  e.sampler_name = c.sampler_name;
  e.batch_sampler_name = c.batch_sampler_name;
  e.site_name = c.site_name;
  e.pin_memory = static_cast<uint8_t>(c.pin_memory);
  e.persistent_workers = c.persistent_workers ? 1 : 0;
  e.drop_last = c.drop_last ? 1 : 0;
  e.in_order = c.in_order ? 1 : 0;
  e.mp_context = static_cast<uint8_t>(c.mp_context);
  e.dataset_kind = static_cast<uint8_t>(c.dataset_kind);
  e.flags = c.flags;
  return emit_with(core_of(Kind::kLoaderConfig, c.dataset_name, at, at, c.loader_id), e);
}

// Hand-offs start in the past (the put), so they overlap what the
// receiving thread did meanwhile: kAsync.
bool record_batch_handoff(Ticks put, Ticks received, const BatchHandoff& h) noexcept {
  auto e = ext_of<BatchHandoffExt>(Ext::kBatchHandoff);
  e.loader_id = h.loader_id;
  e.batch_index = h.batch_index;
  e.requested = h.requested;
  e.generation = h.generation;
  e.worker = h.worker;
  e.worker_pid = h.worker_pid;
  return emit_with(core_of(Kind::kBatchHandoff, 0, put, received, h.batch_index, kAsync), e);
}

bool record_channel_handoff(Ticks put, Ticks got, const ChannelHandoff& h) noexcept {
  auto e = ext_of<ChannelHandoffExt>(Ext::kChannelHandoff);
  e.channel_id = h.channel_id;
  e.object_id = h.object_id;
  e.bytes = h.bytes;
  e.requested = h.requested;
  e.producer_pid = h.producer_pid;
  e.producer_tid = h.producer_tid;
  e.consumer_pid = h.consumer_pid;
  e.consumer_tid = h.consumer_tid;
  e.channel_type = static_cast<uint8_t>(h.type);
  e.parts = h.parts;
  return emit_with(core_of(Kind::kChannelHandoff, 0, put, got, h.object_id, kAsync), e);
}

bool record_stack_sample(Ticks at, const StackSample& s, std::span<const NameId> frames) noexcept {
  if (!enabled()) return false;
  auto e = ext_of<StackSampleExt>(Ext::kStackSample);
  e.flags = s.flags;
  if (frames.size() > kMaxStackFrames) {  // keep the innermost
    frames = frames.first(kMaxStackFrames);
    e.flags |= kStackTruncated;
  }
  const auto frame_bytes = static_cast<uint32_t>(frames.size() * sizeof(NameId));
  e.h.bytes = static_cast<uint16_t>(pad8(sizeof e + frame_bytes));
  e.interval_ns = s.interval_ns;
  e.tid = s.tid != 0 ? s.tid : detail::current_tid();
  e.cost_ns = s.cost_ns;
  e.frame_count = static_cast<uint16_t>(frames.size());
  e.on_cpu = static_cast<uint8_t>(s.on_cpu);
  static constexpr uint32_t kPad = 0;
  detail::ThreadBuffer::Piece pieces[3] = {{&e, sizeof e}, {frames.data(), frame_bytes},
                                           {&kPad, frame_bytes % 8}};
  const size_t n = frame_bytes == 0 ? 1 : frame_bytes % 8 == 0 ? 2 : 3;
  const CoreRecord core = core_of(Kind::kStackSample, frames.empty() ? 0 : frames[0], at, at, 0);
  return detail::emit_pieces_for_thread(s.tid, core, pieces, n);
}

int attach(std::string_view name, std::string_view data) noexcept {
  if (!detail::ensure_started()) return -ENODEV;
  auto& r = detail::recorder();
  try {
    std::lock_guard lock(r.attach_mu);
    r.pending_attachments.emplace_back(std::string(name), std::string(data));
  } catch (...) {
    return -ENOMEM;
  }
  return 0;
}

}  // namespace stallscope
