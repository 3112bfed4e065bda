#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cli_files.hpp"
#include "commands.hpp"
#include "stallscope/file_summary.hpp"  // terminal_safe
#include "stallscope/reader.hpp"

namespace stallscope::cli {

namespace {

constexpr int kOutputSignals[] = {SIGXFSZ, SIGPIPE};
sigset_t g_ignored_by_us;  // ignored by stallscope, not inherited so

void set_disposition(int sig, sighandler_t handler) {
  struct sigaction sa{};
  sa.sa_handler = handler;
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void ignore_output_signals() {
  sigemptyset(&g_ignored_by_us);
  for (int sig : kOutputSignals) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction ign{};
    ign.sa_handler = SIG_IGN;
    if (::sigaction(sig, &ign, nullptr) == 0) sigaddset(&g_ignored_by_us, sig);
  }
}

sigset_t child_signal_defaults() { return g_ignored_by_us; }

int shell(const std::string& cmd) {
  // The child inherits the dispositions at fork; stallscope writes nothing
  // while it waits.
  for (int sig : kOutputSignals)
    if (sigismember(&g_ignored_by_us, sig)) set_disposition(sig, SIG_DFL);
  const int rc = std::system(cmd.c_str());
  for (int sig : kOutputSignals)
    if (sigismember(&g_ignored_by_us, sig)) set_disposition(sig, SIG_IGN);
  return rc;
}

bool stdout_complete() {
  errno = 0;
  std::cout.flush();
  const bool ok = std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (!ok) {
    const int err = errno;
    // The write that failed may be long past (stdio writes as its buffer
    // fills): its errno is gone then.
    std::cerr << "stallscope: cannot write standard output"
              << (err != 0 ? std::string(": ") + std::strerror(err) : std::string())
              << "; what was written is incomplete\n";
  }
  return ok;
}

std::vector<std::string> expand_inputs(const std::string& cmd,
                                       const std::vector<std::string>& paths, bool* failed) {
  std::vector<std::string> files;
  note_skipped_inputs(cmd, paths);
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

bool parse_expectations(const std::string& cmd, const std::vector<std::string>& items,
                        std::vector<analyzer::Expectation>* out) {
  bool ok = true;
  out->clear();
  out->reserve(items.size());  // results point into it
  for (const auto& item : items) {
    analyzer::Expectation e;
    std::string why;
    if (analyzer::parse_expectation(item, e, &why)) {
      out->push_back(std::move(e));
      continue;
    }
    std::cerr << "stallscope " << cmd << ": " << reader::terminal_safe(why) << "\n";
    ok = false;
  }
  return ok;
}

bool report_expectations(const std::string& cmd, const analyzer::Report& rep,
                         const std::vector<analyzer::Expectation>& expected) {
  bool ok = true;
  for (const auto& x : analyzer::check_expectations(rep, expected)) {
    std::cerr << "stallscope " << cmd << ": expectation " << (x.met ? "met" : "failed") << ": "
              << reader::terminal_safe(x.expectation->text) << " — " << x.what << "\n";
    ok = ok && x.met;
  }
  return ok;
}

}  // namespace stallscope::cli
