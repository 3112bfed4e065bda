// Runs one test case of the running test program again in a fresh process
// (posix_spawn of /proc/self/exe) with exactly the environment given: for
// state fixed once per process, like the analyzer's scratch file ($TMPDIR).
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace stallscope::testing {

// The child's wait status, or -1 when it could not be started.
inline int run_self_test(const std::string& test_path, std::vector<std::string> env) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  std::string run = "--run_test=" + test_path;
  char* argv[] = {self, run.data(), nullptr};
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, self, nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int st = 0;
  return waitpid(pid, &st, 0) == pid ? st : -1;
}

inline bool exited_ok(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace stallscope::testing
