// Test helpers: run the recorder probe (a traced child process) with a
// chosen environment, and load what it wrote with the reader.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "stallscope/reader.hpp"

namespace stallscope::test {

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/stallscope-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ProbeResult {
  int exit_code = -1;    // -1 when killed by a signal
  int term_signal = 0;   // the signal that ended it, 0 when it exited
  long max_rss_kb = -1;  // the probe's peak resident memory
  std::string out, err;
  // First value printed for `key` ("key value" lines), or -1.
  long long value(const std::string& key) const {
    size_t at = 0;
    while ((at = out.find(key + " ", at)) != std::string::npos) {
      if (at == 0 || out[at - 1] == '\n') return std::atoll(out.c_str() + at + key.size() + 1);
      ++at;
    }
    return -1;
  }
};

inline std::string probe_path() {
  return std::string(STALLSCOPE_TEST_BINARY_DIR) + "/tests/libtrace/recorder_probe";
}

// Runs the probe with `args` and extra environment `env` (behind the
// command `prefix`, when given). When the probe
// prints a line starting with `wait_key`, `on_ready(pid)` is called (to
// send a signal, say). Gives up after `timeout_s` (SIGKILL, exit -1).
inline ProbeResult run_probe(const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::string& wait_key = {},
                             const std::function<void(pid_t)>& on_ready = {},
                             int timeout_s = 60,
                             const std::vector<std::string>& prefix = {}) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> all = prefix;  // e.g. setpriv … to run as another user
    all.push_back(probe_path());
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProbeResult r;
  bool fired = wait_key.empty();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, 100) <= 0) continue;
    for (auto& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = ::read(f.fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(f.fd);
        f.fd = -1;
        --open_fds;
        continue;
      }
      (&f == &fds[0] ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
    if (!fired && r.out.find(wait_key + " ") != std::string::npos) {
      fired = true;
      if (on_ready) on_ready(pid);
    }
  }
  int status = 0;
  rusage ru{};
  if (::wait4(pid, &status, 0, &ru) == pid) r.max_rss_kb = ru.ru_maxrss;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

// Everything one file holds, decoded.
struct Loaded {
  reader::Status status = reader::Status::kError;
  std::string error;
  std::vector<reader::Event> events;
  std::vector<std::vector<uint64_t>> ids;  // Event::ids copied, by event index
  std::map<std::string, size_t> by_name;   // events per name
  std::map<uint8_t, size_t> by_kind;       // events per kind
  uint64_t gap_dropped = 0;
  format::FileHeader header{};
  reader::EndTotals end;
  std::string metadata;
  std::vector<reader::Attachment> attachments;
  std::map<uint32_t, std::string> track_names;
  std::map<uint32_t, uint32_t> track_tids;
  std::vector<std::string> strings_of_events;  // name of each event
};

inline Loaded load(const std::string& file) {
  Loaded l;
  reader::TraceReader r(file);
  reader::Event e;
  while (r.next(e)) {
    if (e.kind == static_cast<uint8_t>(format::Kind::kGap)) {
      l.gap_dropped += e.value;
      continue;
    }
    l.events.push_back(e);
    l.ids.emplace_back(e.ids.begin(), e.ids.end());
    l.events.back().ids = {};
    l.events.back().frames = {};
    const std::string n(r.string(e.name_id));
    l.strings_of_events.push_back(n);
    ++l.by_name[n];
    ++l.by_kind[e.kind];
  }
  l.status = r.status();
  l.error = r.error();
  l.header = r.header();
  l.end = r.end();
  l.metadata = r.metadata_json();
  l.attachments = r.attachments();
  for (const auto& t : r.tracks()) {
    l.track_names[t.track_id] = std::string(r.string(t.name_id));
    l.track_tids[t.track_id] = t.tid;
  }
  return l;
}

// The trace files in `dir`, sorted.
inline std::vector<std::string> trace_files(const std::string& dir) {
  std::string error;
  return reader::list_trace_files(dir, &error);
}

}  // namespace stallscope::test
