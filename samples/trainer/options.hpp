// The sample trainer's flags: every knob that moves a bottleneck. Loader
// knobs are the loader's own --loader-* flags (docs/loader.md); the rest are
// listed by usage().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <stallscope/loader/config.hpp>
#include <stallscope/loader/settings.hpp>

namespace trainer {

struct Options {
  std::string data;              // dataset: a directory holding `index` or `list`
  std::vector<std::string> rank_data;  // R=DIR: rank R reads DIR instead
  uint64_t steps = 50;
  double decode_us = 0;          // extra augment CPU time per sample (µs of thread CPU time)
  uint64_t sample_bytes = 0;     // decoded tensor bytes per sample sent to the device (0 = decoded size)
  double compute_ms = 20;        // forward + backward per step
  double update_ms = 0.5;        // optimizer step
  double grad_mb = 0;            // gradient bytes all-reduced per step (MB)
  double bus_gbps = 10;          // collective bus bandwidth
  bool overlap_comm = false;     // all-reduce in buckets during backward
  double host_ms = 0;            // per-step host work (logging, metrics)
  bool host_sleep = false;       // host work blocks (I/O) instead of burning CPU
  bool sync_each_step = false;   // blocking device sync each step (loss.item())
  uint64_t tiny_kernels = 0;     // per step: kernels shorter than their launch (launch-bound)
  double launch_us = 40;         // host CPU time of one of those launches
  bool copy_in_step = false;     // H2D on the compute stream, serialized with compute
  std::vector<std::string> slow; // R=F: rank R's compute and host work F times slower
  bool device_burn = false;
  std::string device = "auto";  // cuda | emulated | auto (CUDA where usable)
  bool trace = true;             // false: capture off (bench/trace_overhead)
  bool quiet = false;
  std::string summary_json;      // write per-run numbers here
  stallscope::loader::Config loader;
  // The loader.* items of STALLSCOPE_SET, applied over the flags (stallscope run --set).
  std::vector<stallscope::loader::SettingOutcome> settings;
};

// Parses argv, then applies STALLSCOPE_SET over the loader flags; 0, 1 for --help (usage printed), or 2 with *error set.
int parse_options(int argc, char** argv, Options* o, std::string* error);
std::string usage();
// Slowdown factor of `rank` (1 when none given).
double slow_factor(const Options& o, int rank);
// The dataset directory of `rank`.
std::string data_for_rank(const Options& o, int rank);

}  // namespace trainer
