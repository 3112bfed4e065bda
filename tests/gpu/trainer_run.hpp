// Helpers of the trainer device tests: a small dataset, a trainer run with
// a trace, and its report.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attach/attach_util.hpp"

namespace trainer_test {

inline const std::string kTrainer = TRAINER_BIN;
inline const std::string kGenDataset = GEN_DATASET_BIN;
inline const std::string kStallscope = STALLSCOPE_BIN;

// True when the CUDA driver library loads (a GPU machine, or one with a
// driver and no device).
inline bool have_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

inline std::string make_dataset(const std::string& dir, int samples, int size_kb) {
  const std::string ds = dir + "/ds";
  attach::run({kGenDataset, "--out", ds, "--samples", std::to_string(samples), "--size-kb",
               std::to_string(size_kb)},
              dir + "/gen.log", 60);
  return ds;
}

// Runs the trainer with `args`, tracing into dir/run; returns the exit code.
inline int train(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv{kTrainer};
  argv.insert(argv.end(), args.begin(), args.end());
  return attach::run(argv, dir + "/trainer.log", 90, {"STALLSCOPE_OUT=" + dir + "/run"});
}

// `stallscope report --json dir/run`, rank 0 (null when missing).
inline nlohmann::json report_rank0(const std::string& dir) {
  const std::string out = dir + "/run/report.json";
  attach::run({"/bin/sh", "-c", kStallscope + " report --json " + dir + "/run > " + out},
              dir + "/report.log", 60);
  const auto j = attach::report_json(dir + "/run");
  return j.is_object() && j.contains("ranks") && !j["ranks"].empty() ? j["ranks"][0]
                                                                     : nlohmann::json();
}

}  // namespace trainer_test
