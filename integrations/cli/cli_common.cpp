#include <unistd.h>

#include <iostream>

#include "commands.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::cli {

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
