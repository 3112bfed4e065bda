// `stallscope scaling --launch CMD --ranks 1,2,4 [--steps K] [--out DIR]`:
// records one run per rank count, each into its own fresh directory, by
// running CMD through the shell with {n} (and {steps}) substituted and
// STALLSCOPE_OUT set.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cmd_scaling.hpp"
#include "commands.hpp"

namespace stallscope::cli {

namespace {

std::string substitute(std::string s, const std::string& key, const std::string& value) {
  for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
    s.replace(at, key.size(), value);
  return s;
}

std::string command_for(const ScalingArgs& a, int n) {
  std::string cmd = substitute(a.launch, "{n}", std::to_string(n));
  if (a.steps > 0) {
    if (cmd.find("{steps}") != std::string::npos)
      cmd = substitute(cmd, "{steps}", std::to_string(a.steps));
    else
      cmd += " --steps " + std::to_string(a.steps);
  }
  return cmd;
}

}  // namespace

int launch_scaling_runs(ScalingArgs& a) {
  namespace fs = std::filesystem;
  if (a.launch.find("{n}") == std::string::npos) {
    std::cerr << "stallscope scaling: --launch '" << a.launch
              << "' has no {n} for the rank count\n";
    return kExitUsage;
  }
  if (a.ranks.size() < 2) {
    std::cerr
        << "stallscope scaling: --ranks needs at least two rank counts (e.g. --ranks 1,2,4)\n";
    return kExitUsage;
  }
  for (int n : a.ranks) {
    if (n < 1) {
      std::cerr << "stallscope scaling: --ranks: " << n << " is not a rank count\n";
      return kExitUsage;
    }
    const fs::path dir = fs::absolute(fs::path(a.out) / ("ranks-" + std::to_string(n)));
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
      std::cerr << "stallscope scaling: " << dir.string()
                << " already holds a run: choose another --out\n";
      return kExitUsage;
    }
    fs::create_directories(dir, ec);
    if (ec) {
      std::cerr << "stallscope scaling: cannot create " << dir.string() << ": " << ec.message()
                << "\n";
      return kExitInput;
    }
    const std::string cmd = command_for(a, n);
    std::cerr << "stallscope scaling: " << n << " rank(s): " << cmd << "\n";
    setenv("STALLSCOPE_OUT", dir.c_str(), 1);
    const int st = shell(cmd);
    unsetenv("STALLSCOPE_OUT");
    if (st != 0) {
      std::cerr << "stallscope scaling: the " << n << "-rank run failed (exit status "
                << (WIFEXITED(st) ? WEXITSTATUS(st) : st) << "): " << cmd << "\n";
      return kExitInput;
    }
    a.runs.push_back(dir.string());
  }
  return kExitOk;
}

}  // namespace stallscope::cli
