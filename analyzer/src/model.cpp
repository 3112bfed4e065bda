#include <array>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/parts.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

namespace {
struct PartNames {
  const char* key;
  const char* label;
  const char* group;
};
constexpr std::array<PartNames, kPartCount> kNames = {{
    {"compute", "compute", "compute"},
    {"comm.straggler_wait", "straggler wait", "communication"},
    {"comm.transfer", "comm transfer", "communication"},
    {"copy.h2d", "H2D copy", "copies"},
    {"copy.other", "other device work", "copies"},
    {"data.storage", "storage", "data stall"},
    {"data.preprocess", "preprocessing", "data stall"},
    {"data.handoff", "hand-off", "data stall"},
    {"data.unknown", "data (unsplit)", "data stall"},
    {"host.after_sync", "host after sync", "host"},
    {"host.launch", "launch/API", "host"},
    {"host.cpu", "host on-CPU", "host"},
    {"host.blocked", "host blocked", "host"},
}};
}  // namespace

std::string_view part_key(Part p) noexcept { return kNames[idx(p)].key; }
std::string_view part_label(Part p) noexcept { return kNames[idx(p)].label; }
std::string_view part_group(Part p) noexcept { return kNames[idx(p)].group; }

std::string_view step_source_key(StepSource s) noexcept {
  switch (s) {
    case StepSource::kStepEvents: return "step_events";
    case StepSource::kRanges: return "ranges";
    case StepSource::kDataWaits: return "data_waits";
    case StepSource::kHandoffs: return "handoffs";
    case StepSource::kInferred: return "inferred";
    case StepSource::kWholeTrace: return "whole_trace";
    default: return "none";
  }
}

std::string_view stage_key(StageKind k) noexcept {
  switch (k) {
    case StageKind::kStorage: return "storage";
    case StageKind::kPreprocess: return "preprocessing";
    case StageKind::kCollate: return "collate";
    case StageKind::kPinH2D: return "h2d";
    case StageKind::kTrainerLoad: return "trainer_load";
    case StageKind::kComm: return "comm";
    case StageKind::kProducers: return "producers";
  }
  return "?";
}

namespace {
struct FigureName {
  Fig id;
  const char* key;
  const char* unit;
};
// In Fig order (checked below).
constexpr std::array<FigureName, static_cast<size_t>(Fig::kCount)> kFigures = {{
    {Fig::kBytesPerBatch, "bytes_per_batch", "B"},
    {Fig::kReadBandwidth, "read_bandwidth", "B/s"},
    {Fig::kReads, "reads", ""},
    {Fig::kMeanReadBytes, "mean_read_bytes", "B"},
    {Fig::kFiles, "files", ""},
    {Fig::kReadsWithQueueDepth, "reads_with_queue_depth", ""},
    {Fig::kCacheMissBytes, "cache_miss_bytes", "B"},
    {Fig::kCacheClassifiedBytes, "cache_classified_bytes", "B"},
    {Fig::kMeanQueueDepth, "mean_queue_depth", ""},
    {Fig::kWorkers, "workers", ""},
    {Fig::kBusyPerSample, "busy_per_sample", "ms"},
    {Fig::kSamplesPerBatch, "samples_per_batch", ""},
    {Fig::kFetchPerBatch, "fetch_per_batch", "ms"},
    {Fig::kCollatePerBatch, "collate_per_batch", "ms"},
    {Fig::kHandoffPerBatch, "handoff_per_batch", "ms"},
    {Fig::kBytesPerStep, "bytes_per_step", "B"},
    {Fig::kPageableBandwidth, "pageable_bandwidth", "B/s"},
    {Fig::kPinnedBandwidth, "pinned_bandwidth", "B/s"},
    {Fig::kPageableBytes, "pageable_bytes", "B"},
    {Fig::kCollectiveKernels, "collective_kernels", ""},
    {Fig::kBusBandwidth, "bus_bandwidth", "B/s"},
    {Fig::kLargeCollectiveKernels, "large_collective_kernels", ""},
    {Fig::kLargeBusBandwidth, "large_bus_bandwidth", "B/s"},
    {Fig::kUnjoinedCollectiveKernels, "unjoined_collective_kernels", ""},
    {Fig::kProducers, "producers", ""},
    {Fig::kRelays, "relays", ""},
    {Fig::kItemsPerStep, "items_per_step", ""},
    {Fig::kBytesPerItem, "bytes_per_item", "B"},
    {Fig::kWaitPerItem, "wait_per_handoff", "ms"},
}};
constexpr bool figures_in_order() {
  for (size_t i = 0; i < kFigures.size(); ++i)
    if (static_cast<size_t>(kFigures[i].id) != i) return false;
  return true;
}
static_assert(figures_in_order(), "kFigures must list every Fig in order");
}  // namespace

std::string_view figure_key(Fig f) noexcept { return kFigures[static_cast<size_t>(f)].key; }
std::string_view figure_unit(Fig f) noexcept { return kFigures[static_cast<size_t>(f)].unit; }

uint32_t RankTrace::name_id(const std::string& n) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == n) return static_cast<uint32_t>(i);
  names.push_back(n);
  return static_cast<uint32_t>(names.size() - 1);
}

void RankTrace::add_batch_ready(uint32_t track, int64_t at, uint64_t batch,
                                const std::vector<uint64_t>& samples) {
  Ev e = Ev::span(Kind::kBatchReady, track, at, at);
  e.phase = format::kInstant;
  e.work().batch = batch;
  e.corr = batch;
  e.work().ids_at = static_cast<uint32_t>(ids.size());
  e.work().ids_n = static_cast<uint32_t>(samples.size());
  ids.insert(ids.end(), samples.begin(), samples.end());
  events.push_back(e);
}

}  // namespace stallscope::analyzer
