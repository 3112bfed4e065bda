#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "commands.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::cli {

namespace {
bool g_file_size_signal_ignored = false;  // by stallscope, not inherited so
}  // namespace

void ignore_file_size_signal() {
  struct sigaction old{};
  if (::sigaction(SIGXFSZ, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) return;
  struct sigaction ign{};
  ign.sa_handler = SIG_IGN;
  g_file_size_signal_ignored = ::sigaction(SIGXFSZ, &ign, nullptr) == 0;
}

sigset_t child_signal_defaults() {
  sigset_t set;
  sigemptyset(&set);
  if (g_file_size_signal_ignored) sigaddset(&set, SIGXFSZ);
  return set;
}

int shell(const std::string& cmd) {
  if (!g_file_size_signal_ignored) return std::system(cmd.c_str());
  // The child inherits the disposition at fork; stallscope writes nothing
  // while it waits.
  struct sigaction dfl{}, ign{};
  dfl.sa_handler = SIG_DFL;
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &dfl, nullptr);
  const int rc = std::system(cmd.c_str());
  ::sigaction(SIGXFSZ, &ign, nullptr);
  return rc;
}

std::vector<std::string> expand_inputs(const std::string& cmd,
                                       const std::vector<std::string>& paths, bool* failed) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::string error;
    auto found = reader::list_trace_files(p, &error);
    if (found.empty()) {
      std::cerr << "stallscope " << cmd << ": " << error << "\n";
      *failed = true;
    }
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

void show_progress(size_t i, size_t n, const std::string& path) {
  static const bool kIsTty = ::isatty(STDERR_FILENO) == 1;
  if (!kIsTty) return;
  if (i >= n) {
    std::cerr << "\r\033[K" << std::flush;
    return;
  }
  std::cerr << "\r\033[K[" << i + 1 << "/" << n << "] reading " << path << std::flush;
}

}  // namespace stallscope::cli
