// The training step of the sample trainer: next batch (the loader already
// decoded it on its pool and copied it to the device), forward/backward on
// the device, gradient all-reduce (after backward, or in buckets during it),
// optimizer update, optional blocking sync and host work.
#pragma once

#include <cstdint>
#include <vector>

#include <stallscope/loader/loader.hpp>

#include "device.hpp"
#include "options.hpp"

namespace trainer {

struct StepTimes {
  std::vector<double> step_ms;  // wall time of every step
  uint64_t samples = 0;
  double wall_s = 0;
};

// Runs o.steps steps; 0, or -errno with *error set (loader failures).
int run_steps(const Options& o, int rank, stallscope::loader::Loader& loader, Device& dev,
              StepTimes* out, std::string* error);

}  // namespace trainer
