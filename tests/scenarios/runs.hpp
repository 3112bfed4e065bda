// Running the sample trainer for a scenario and reading back what the
// analyzer said: one run = drop the dataset from the page cache, the trainer
// (under mpirun for several ranks, under taskset when asked), then
// `stallscope report --json` on its run directory.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"

namespace scenarios {

struct Tools {
  std::string trainer, gen, stallscope, slowfs, results, work;
  int steps = 60;
  std::map<std::string, std::string> vars;  // {MNT<i>} → mount path
};

struct Run {
  nlohmann::json all;                       // the whole `stallscope report --json`
  nlohmann::json report;                    // the rank-0 object
  double mean_ms = 0;                       // the trainer's own steady mean (rank 0)
  const nlohmann::json* rank(int r) const;  // null when that rank is missing
};

bool sh(const std::string& cmd);
std::string q(const std::string& s);
// "" when multi-rank runs can work here, else why not (skip).
std::string mpi_missing(const Tools& t);
bool run_once(const Tools& t, const Scenario& s, const std::string& data,
              const std::vector<std::string>& flags, const std::string& tag, Run* out);

}  // namespace scenarios
