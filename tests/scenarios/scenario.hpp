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
  std::vector<std::string> gen;     // gen_dataset flags
  std::vector<std::string> common;  // trainer flags of every run
  std::vector<std::string> inject;  // added to inject the cause
  std::string cause_part;           // expected largest non-compute part ("" = healthy)
  // Mixed causes: these parts too must each be >= kMixedMinShare of the
  // step, the top cause may be any of them, and the attributed time checked
  // against the calibration is their sum with cause_part's.
  std::vector<std::string> also_parts;
  std::string remedy;  // expected among the top two remedies
  // Mixed causes: one of these must be among the top two as well (a remedy
  // for the other cause; which one depends on the idle CPUs).
  std::vector<std::string> also_remedy;
  double share_tolerance = 0.35;    // |attributed - implied| / implied
  bool fuse = false;                // read through slowfs
  std::vector<std::string> slowfs;  // slowfs flags
  // Multi-rank: one slowfs mount per entry (its flags), `mnt<i>` under the
  // work directory; {MNT<i>} in trainer flags is replaced by its path.
  std::vector<std::vector<std::string>> mounts;
  int ranks = 1;            // > 1: under mpirun
  int remedy_rank = 0;      // whose report must name the remedy
  int straggler_rank = -1;  // >= 0: the cross-rank report must name it, cause storage
  // Checked like the others, but a failed check is expected until the
  // feature it needs lands: the runner prints XFAIL (or XPASS) and exits 0
  // unless a run itself failed; the result file and docs/scenarios.md say
  // which.
  std::string expected_to_fail;  // why ("" = must pass)
  std::string taskset;           // CPU list for taskset, "" = none
  // The remedy only applies when usable CPUs sat idle during the stalls
  // (more workers): on a machine other processes keep busy the premise
  // does not hold, and the scenario is skipped, visibly, after its checks
  // of the cause and its share.
  bool needs_idle_cpus = false;
};

constexpr double kMixedMinShare = 0.10;

const std::vector<Scenario>& all_scenarios();

}  // namespace scenarios
