// Helpers of the attach tests: start `stallscope run` as a child process,
// wait for it with a deadline, read the files it leaves.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attach {

// A fresh directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// True when the preload shim was built (interposed reads are recorded).
bool have_shim();
// The shim, else the recorder library (the C API only).
std::string preload_lib();

// Starts argv with `extra_env` added (NAME=value), stdout and stderr
// appended to `log`. STALLSCOPE_PRELOAD_LIB points at the test's shim.
pid_t start(const std::vector<std::string>& argv, const std::string& log,
            const std::vector<std::string>& extra_env = {});
// Waits for `pid`; returns its raw wait status, or -1 after `timeout_s`
// (the process is then killed).
int wait_for_exit(pid_t pid, double timeout_s);
// Runs argv to completion; returns the exit code (128+sig when killed),
// -1 on timeout.
int run(const std::vector<std::string>& argv, const std::string& log, double timeout_s,
        const std::vector<std::string>& extra_env = {});
int exit_code(int raw_status);

// Polls `pred` every 20 ms until true or `timeout_s`.
bool eventually(const std::function<bool()>& pred, double timeout_s);
std::string slurp(const std::string& path);
bool exists(const std::string& path);
// Modification time in seconds (with ns), or -1.
double mtime(const std::string& path);
// RUN/report.json parsed (null when missing or bad).
nlohmann::json report_json(const std::string& run_dir);
// Sum over RUN/progress/* of a field ("steps", "windows_closed"), and
// whether any file says capture=<value>.
uint64_t progress_sum(const std::string& run_dir, const std::string& field);
bool progress_capture_all(const std::string& run_dir, bool on);

}  // namespace attach
