// Keeps a test's recorded traces for later analysis (scripts/corpus.sh).
//
// With STALLSCOPE_KEEP_TRACES=DIR, `keep_traces(work, tag)` copies every
// trace under `work` (.sst files and PyTorch profiler traces) into
// DIR/<tag>-<pid>-<n>/, keeping their relative paths, so one run directory
// stays one run. Without the variable it does nothing. Never throws: a test
// must not fail because a copy for later did.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace stallscope_tests {

inline bool is_kept_trace(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  auto ends = [&](const char* s) {
    const std::string suffix(s);
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".sst") || ends(".pt.trace.json") || ends(".pt.trace.json.gz");
}

inline void keep_traces(const std::filesystem::path& work, const std::string& tag) {
  namespace fs = std::filesystem;
  const char* keep = std::getenv("STALLSCOPE_KEEP_TRACES");
  if (keep == nullptr || *keep == '\0') return;
  static std::atomic<int> serial{0};
  std::error_code ec;
  const fs::path to = fs::path(keep) / (tag + "-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(serial.fetch_add(1)));
  bool made = false;
  for (fs::recursive_directory_iterator it(work, fs::directory_options::skip_permission_denied,
                                           ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || !is_kept_trace(it->path())) continue;
    const fs::path rel = fs::relative(it->path(), work, ec);
    if (ec) break;
    if (!made) made = fs::create_directories(to, ec) || fs::is_directory(to);
    fs::create_directories((to / rel).parent_path(), ec);
    fs::copy_file(it->path(), to / rel, fs::copy_options::overwrite_existing, ec);
  }
}

}  // namespace stallscope_tests
