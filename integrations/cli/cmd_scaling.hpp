// Arguments of `stallscope scaling` shared by its two files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stallscope::cli {

struct ScalingArgs {
  std::vector<std::string> runs;
  std::string launch;
  std::vector<int> ranks;
  uint64_t steps = 0;
  std::string out = "stallscope-scaling";
  bool json = false;
  std::string html;
  size_t jobs = 0;  // ranks analyzed at once (0: one per core)
};

// Runs `launch` once per rank count into <out>/ranks-<n> (STALLSCOPE_OUT),
// appending each run directory to args.runs; an exit code of commands.hpp.
int launch_scaling_runs(ScalingArgs& args);

}  // namespace stallscope::cli
