// stallscope loader — the storage probe.
//
// Reads the dataset's first files at queue depths 1, 8 and 32, a third of a
// time budget (0.5 s by default) each, O_DIRECT where the filesystem allows,
// and reports the rates per queue depth. No read is issued once the budget
// has passed on Sys::monotonic_ns; the reads then in flight are waited for,
// so the probe returns a little after its budget (later on a loaded machine). The loader records the result as
// the "loader.probe" attachment so the analyzer can predict the gain of a
// deeper queue or larger reads the run never used (format: docs/loader.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stallscope/loader/dataset.hpp"
#include "stallscope/loader/export.hpp"
#include "stallscope/loader/storage.hpp"
#include "stallscope/loader/tier.hpp"

namespace stallscope::loader {

struct ProbeRate {
  uint32_t queue_depth = 0;
  uint64_t bytes = 0;
  uint64_t issued = 0;  // reads submitted before this depth's deadline
  uint64_t reads = 0;   // of those, the ones that returned data
  double seconds = 0;   // from the depth's start to its last read reaped
  double mb_per_s() const noexcept { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

struct ProbeReport {
  TierInfo tier;
  bool direct = false;
  uint64_t read_size = 0;
  std::string backend;
  std::vector<ProbeRate> rates;
  STALLSCOPE_LOADER_API std::string json() const;
};

// 0, or -errno when nothing could be read (the report says what was done).
STALLSCOPE_LOADER_API int run_storage_probe(const Dataset& ds, Backend backend, uint64_t read_size,
                                            double budget_s, Sys& sys, ProbeReport* out) noexcept;

}  // namespace stallscope::loader
