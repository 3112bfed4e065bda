// Runs the stallscope binary for black-box tests: exit code, stdout, stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "libtrace/trace_builder.hpp"

namespace stallscope::testing {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `stallscope args...` with its output captured in `dir`; `shell_setup`
// (e.g. "ulimit -f 1") runs first in the same shell. With `limit_s`, the
// command is stopped after that long (exit code 124): a hang guard.
inline CliResult run_cli(const TempDir& dir, const std::vector<std::string>& args,
                         const std::string& shell_setup = "", int limit_s = 0) {
  std::string cmd = shell_setup.empty() ? "" : shell_setup + "; ";
  cmd += "exec ";
  if (limit_s > 0) cmd += "timeout -k 5 " + std::to_string(limit_s) + " ";
  cmd += shell_quote(STALLSCOPE_CLI);
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  const std::string out = dir.file("cli.out"), err = dir.file("cli.err");
  cmd += " >";
  cmd += shell_quote(out);
  cmd += " 2>";
  cmd += shell_quote(err);
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace stallscope::testing
