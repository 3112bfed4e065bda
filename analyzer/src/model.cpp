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
    default: return "none";
  }
}

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
