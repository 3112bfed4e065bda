// Test helpers: run a program under the shim (plain LD_PRELOAD) and load
// every event of the run directory it wrote.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "stallscope/reader.hpp"

namespace stallscope::test {

inline std::string build_dir() { return STALLSCOPE_TEST_BINARY_DIR; }
inline std::string shim() { return build_dir() + "/lib/libstallscope_preload.so"; }
inline std::string helper(const std::string& name) {
  return build_dir() + "/tests/preload/" + name;
}

class TempDir {
 public:
  explicit TempDir(const char* base = "/tmp") {
    std::string tmpl = std::string(base) + "/stallscope-preload-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
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

struct RunResult {
  int exit_code = -1;   // -1 when killed by a signal or timed out
  int term_signal = 0;
  std::string out, err;
  long long value(const std::string& key) const {
    size_t at = 0;
    while ((at = out.find(key + " ", at)) != std::string::npos) {
      if (at == 0 || out[at - 1] == '\n') return std::atoll(out.c_str() + at + key.size() + 1);
      ++at;
    }
    return -1;
  }
};

// Runs argv with `env` added (LD_PRELOAD=shim unless `preload` is false).
inline RunResult run(const std::vector<std::string>& argv,
                     std::map<std::string, std::string> env, bool preload = true,
                     int timeout_s = 60) {
  if (preload) env.emplace("LD_PRELOAD", shim());
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  RunResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int open_fds = 2;
  while (open_fds > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 200) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) { ::close(fds[i].fd); fds[i].fd = -1; --open_fds; continue; }
      (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
  }
  if (open_fds > 0) ::kill(pid, SIGKILL);
  for (auto& f : fds) if (f.fd >= 0) ::close(f.fd);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.term_signal = WTERMSIG(st);
  return r;
}

// Installs, in a child about to exec, a seccomp filter that makes system
// call `nr` fail with `err`; false when the kernel refused the filter.
inline bool refuse_syscall(long nr, int err) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Runs argv in a forked child whose stdout and stderr go to `logs`/out.txt
// and `logs`/err.txt. In the child, `in_child()` runs first (a seccomp
// filter, a chdir, variables unset: false makes the child exit 125), then
// `env` is set, then argv is exec'd. Killed past `timeout_s`.
template <typename Setup>
RunResult run_to_files(const std::string& logs, const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env, Setup in_child,
                       int timeout_s = 60) {
  const std::string out = logs + "/out.txt", err = logs + "/err.txt";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(126);
    if (!in_child()) ::_exit(125);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  RunResult r;
  int st = 0;
  for (int i = 0; i < timeout_s * 10 && ::waitpid(pid, &st, WNOHANG) == 0; ++i) ::usleep(100000);
  if (::waitpid(pid, &st, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.term_signal = WTERMSIG(st);
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs argv like run(), with perf_event_open refused (errno `refusal`, as
// perf_event_paranoid 3 refuses it with EACCES) by a seccomp filter
// installed in the child before exec; stdout and stderr go to files in dir.
inline RunResult run_with_perf_refused(const TempDir& dir, const std::vector<std::string>& argv,
                                       std::map<std::string, std::string> env,
                                       int refusal = EACCES) {
  env.emplace("LD_PRELOAD", shim());
  return run_to_files(dir.path(), argv, env,
                      [refusal] { return refuse_syscall(__NR_perf_event_open, refusal); });
}

struct Ev {
  uint32_t pid = 0, parent_pid = 0, tid = 0;
  std::string thread;   // track (thread) name
  uint8_t kind = 0;
  std::string name;     // name string (path of a storage read, range name)
  uint16_t aux = 0;
  int64_t ts_ns = 0, dur_ns = 0;
  format::IoExt io{};
  format::WorkExt work{};
  format::RangeExt range{};
  format::ChannelHandoffExt handoff{};
  format::StackSampleExt stack{};
  std::vector<std::string> frames;  // a stack sample's, innermost first
};

struct FileInfo {
  std::string path;
  uint32_t pid = 0, parent_pid = 0;
  reader::Status status = reader::Status::kError;
  std::string comm;
};

struct RunTrace {
  std::vector<FileInfo> files;
  std::vector<Ev> events;
  std::vector<Ev> of_kind(format::Kind k) const {
    std::vector<Ev> out;
    for (const Ev& e : events) if (e.kind == static_cast<uint8_t>(k)) out.push_back(e);
    return out;
  }
};

inline RunTrace load_run(const std::string& dir) {
  RunTrace t;
  std::string error;
  for (const std::string& f : reader::list_trace_files(dir, &error)) {
    reader::TraceReader r(f);
    FileInfo fi{f, r.header().pid, r.header().parent_pid, r.status(), ""};
    fi.comm = r.metadata_value("/comm").value_or("");
    reader::Event e;
    while (r.next(e)) {
      Ev ev;
      ev.pid = fi.pid;
      ev.parent_pid = fi.parent_pid;
      if (const reader::TrackInfo* tr = r.track(e.track_id)) {
        ev.tid = tr->tid;
        ev.thread = std::string(r.string(tr->name_id));
      }
      ev.kind = e.kind;
      ev.name = std::string(r.string(e.name_id));
      ev.aux = e.aux;
      ev.ts_ns = e.ts_ns;
      ev.dur_ns = e.dur_ns;
      if (e.has(format::Ext::kIo)) ev.io = e.io;
      if (e.has(format::Ext::kWork)) ev.work = e.work;
      if (e.has(format::Ext::kRange)) ev.range = e.range;
      if (e.has(format::Ext::kChannelHandoff)) ev.handoff = e.channel_handoff;
      if (e.has(format::Ext::kStackSample)) {
        ev.stack = e.stack_sample;
        for (uint32_t id : e.frames) ev.frames.emplace_back(r.string(id));
      }
      t.events.push_back(ev);
    }
    fi.status = r.status();
    t.files.push_back(fi);
  }
  return t;
}

}  // namespace stallscope::test
