// What the sample trainer records about itself for the analyzer (the
// metadata keys analyzer/INTEGRATION.md names: `loader`, `storage_probe`,
// `emulated_device`), and its own summary of a run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <stallscope/loader/dataset.hpp>

#include "comm.hpp"
#include "emulated_device.hpp"
#include "options.hpp"
#include "step_loop.hpp"

namespace trainer {

// Mean decoded sample size from DIR/dataset.json (gen_dataset), else 64 KiB.
uint64_t mean_decoded_bytes(const std::string& dir);
// Runs the storage probe (when o.loader.probe) and attaches `loader.probe`,
// `storage_probe` and `loader`; `say` prints the probe result.
void record_facts(const Options& o, const stallscope::loader::Dataset& ds, const Comm& comm, bool say);
// Attaches `emulated_device` (H2D bandwidths, bus, streams) and `trainer.config`.
void attach_device_model(const Options& o, const EmulatedDevice& dev, std::string_view copy_device);

struct RunSummary {
  double p50_ms = 0, mean_ms = 0, samples_per_s = 0;
  uint64_t warmup = 0;
};
// Steady steps: all but the first max(3, 10 %).
RunSummary summarize(const StepTimes& t);
void write_summary(const std::string& path, const Options& o, const StepTimes& t, const RunSummary& s);

}  // namespace trainer
