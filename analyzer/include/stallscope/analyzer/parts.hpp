// stallscope analyzer — the exclusive parts a step's wall time is split into
// (DESIGN.md "How a step is attributed"), in priority order: where two
// causes overlap, the time counts once, for the earlier part of this list.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stallscope::analyzer {

enum class Part : uint8_t {
  kCompute,         // a compute kernel runs (or, with no device, the trainer is on CPU)
  kStragglerWait,   // collective: waiting for the last rank to arrive (multi-rank)
  kCommTransfer,    // collective running, no compute overlapping
  kCopyH2D,         // host-to-device copy exposed
  kCopyOther,       // D2H, D2D, memset exposed
  kDataStorage,     // data stall: reads in flight or waiting for submission
  kDataPreprocess,  // data stall: waiting for a worker, preprocessing, collate
  kDataHandoff,     // data stall: a ready batch passed between processes (IPC, unpickling)
  kDataUnknown,     // data stall neither lineage nor producer activity could split
  kHostAfterSync,   // device idle after a blocking sync / D2H returned
  kHostLaunch,      // device idle, trainer inside a CUDA/NCCL API call
  kHostCpu,         // device idle, trainer on CPU
  kHostBlocked,     // device idle, trainer off CPU, not waiting for data
  kCount
};

inline constexpr size_t kPartCount = static_cast<size_t>(Part::kCount);

// Which events defined the steps (most certain first).
// kHandoffs: the hand-offs of objects to the trainer thread (channel
// messages, relay wake-ups), blocking or not. kInferred: step events an
// importer inferred (a profiler trace without step marks: its top-level
// ranges or the period of its kernels). kWholeTrace: nothing delimits steps;
// the whole trace is one window.
enum class StepSource : uint8_t {
  kStepEvents, kRanges, kDataWaits, kNone, kHandoffs, kInferred, kWholeTrace };
std::string_view step_source_key(StepSource s) noexcept;  // "step_events", "ranges", …
using PartNs = std::array<int64_t, kPartCount>;

constexpr size_t idx(Part p) noexcept { return static_cast<size_t>(p); }

// Stable JSON key: "compute", "comm.straggler_wait", … (docs/report-schema.md).
std::string_view part_key(Part p) noexcept;
// Words for the terminal report: "compute", "straggler wait", …
std::string_view part_label(Part p) noexcept;
// Group of a part: "compute", "communication", "copies", "data stall", "host".
std::string_view part_group(Part p) noexcept;

// The data-stall parts: storage, preprocessing, hand-off, unsplit.
constexpr bool is_data(Part p) noexcept {
  return p == Part::kDataStorage || p == Part::kDataPreprocess || p == Part::kDataHandoff ||
         p == Part::kDataUnknown;
}

inline int64_t sum(const PartNs& p) noexcept {
  int64_t s = 0;
  for (int64_t v : p) s += v;
  return s;
}

}  // namespace stallscope::analyzer
