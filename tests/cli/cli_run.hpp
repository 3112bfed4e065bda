// Runs the stallscope binary for black-box tests: exit code, stdout, stderr.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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
  long max_rss_kb = -1;  // the command's peak resident memory (run_cli_measured only)
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

// As run_cli, without a shell, and with the command's peak resident memory
// (wait4's rusage of that one child, not of every child the test ran).
inline CliResult run_cli_measured(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> words{STALLSCOPE_CLI};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const std::string out = dir.file("cli.out"), err = dir.file("cli.err");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  CliResult r;
  int status = 0;
  rusage ru{};
  if (pid < 0 || ::wait4(pid, &status, 0, &ru) != pid) return r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.max_rss_kb = ru.ru_maxrss;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace stallscope::testing
