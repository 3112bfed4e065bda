// One bottleneck scenario of the suite (issue 5): a dataset, the trainer
// flags that inject a cause, the flags of the calibration run without it,
// and what the analyzer must say.
#pragma once

#include <string>
#include <vector>

namespace scenarios {

struct Scenario {
  int id = 0;
  std::string name;
  std::vector<std::string> gen;          // gen_dataset flags
  std::vector<std::string> common;       // trainer flags of every run
  std::vector<std::string> inject;       // added to inject the cause
  std::string cause_part;                // expected largest non-compute part ("" = healthy)
  std::string remedy;                    // expected among the top two remedies
  double share_tolerance = 0.35;         // |attributed - implied| / implied
  bool fuse = false;                     // read through slowfs
  std::vector<std::string> slowfs;       // slowfs flags
  int ranks = 1;                         // > 1: under mpirun
  bool expected_to_fail = false;         // until the multi-rank issue
  std::string taskset;                   // CPU list for taskset, "" = none
  // The remedy only applies when usable CPUs sat idle during the stalls
  // (more workers): on a machine other processes keep busy the premise
  // does not hold, and the scenario is skipped, visibly, after its checks
  // of the cause and its share.
  bool needs_idle_cpus = false;
};

const std::vector<Scenario>& all_scenarios();

}  // namespace scenarios
