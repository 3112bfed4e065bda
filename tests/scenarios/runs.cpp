#include "runs.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <stallscope/loader/tier.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace scenarios {

namespace {

// Few cores, as root: every rank may share every core, and waiting ranks
// yield their core instead of spinning (docs/scenarios.md).
constexpr const char* kMpirun =
    "mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1";

constexpr int kNice = -10;

std::string expand(std::string f, const Tools& t) {
  for (const auto& [k, v] : t.vars)
    for (size_t at; (at = f.find(k)) != std::string::npos;) f.replace(at, k.size(), v);
  return f;
}

}  // namespace

std::string q(const std::string& s) { return "'" + s + "'"; }

bool sh(const std::string& cmd) {
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  return std::system(cmd.c_str()) == 0;
}

std::string mpi_missing(const Tools& t) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    return "mpirun is not installed (openmpi-bin)";
  const fs::path module = fs::path(t.trainer).parent_path() / "libstallscope_trainer_mpi.so";
  if (!fs::exists(module))
    return module.string() + " was not built (MPI not found at configure time)";
  return "";
}

const json* Run::rank(int r) const {
  for (const auto& x : all["ranks"])
    if (x.value("rank", -1) == r) return &x;
  return nullptr;
}

bool run_once(const Tools& t, const Scenario& s, const std::string& data,
              const std::vector<std::string>& flags, const std::string& tag, Run* out) {
  stallscope::loader::drop_cache(data);
  const std::string dir = t.work + "/" + tag;
  fs::remove_all(dir);
  // Ahead of other processes' CPU load (other jobs, parallel builds): a
  // scenario measures the cause it injects, not the neighbours. Without the
  // privilege nice only warns and runs the trainer as it is.
  std::string cmd =
      "STALLSCOPE_OUT=" + q(dir) + " STALLSCOPE_QUIET=on nice -n " + std::to_string(kNice) + " ";
  if (!s.taskset.empty()) cmd += "taskset -c " + s.taskset + " ";
  if (s.ranks > 1) cmd += std::string(kMpirun) + " -np " + std::to_string(s.ranks) + " ";
  cmd += q(t.trainer) + " --quiet --data " + q(data) + " --steps=" + std::to_string(t.steps) +
         " --summary-json " + q(dir + ".summary.json");
  for (const auto& f : flags) cmd += " " + q(expand(f, t));
  if (!sh(cmd) || !sh(q(t.stallscope) + " report --json " + q(dir) + " > " + q(dir + ".json")))
    return false;
  std::ifstream rj(dir + ".json"), sj(dir + ".summary.json");
  const json r = json::parse(rj, nullptr, false), sm = json::parse(sj, nullptr, false);
  if (r.is_discarded() || sm.is_discarded() || r["ranks"].empty()) return false;
  if (static_cast<int>(r["ranks"].size()) != s.ranks)
    return std::fprintf(stderr, "the report holds %zu ranks, expected %d\n", r["ranks"].size(),
                        s.ranks),
           false;
  out->all = r;
  out->report = out->rank(0) ? *out->rank(0) : r["ranks"][0];
  out->mean_ms = sm["mean_ms"].get<double>();
  return true;
}

}  // namespace scenarios
