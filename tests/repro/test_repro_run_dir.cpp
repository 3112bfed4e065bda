// Regressions: what a traced program meets in its run directory must never
// hang it, and nothing there that is not its own is written, followed or
// renamed (RELIABILITY.md 27, 28, 34), at start or mid-run (44); a run
// directory removed mid-run stops tracing (44); under a small descriptor
// limit the recorder never takes the program's descriptors (36). Each case
// failed on the build before the fix: the program hung on a FIFO, wrote
// through a planted symlink, lost or renamed other files after many execs,
// ran out of descriptors, or wrote on into a deleted file.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

std::string make_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

bool is_symlink(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::string host_name() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

// Runs `lifecycle read FILE 100` under the shim with STALLSCOPE_RANK=0, in
// a child that first puts a FIFO or a symlink at the trace file it will
// write (<host>-r0-<pid>.sst: the pid survives the exec). Returns the base.
std::string run_with_planted_trace_path(const TempDir& dir, const std::string& data, bool fifo,
                                        const std::string& victim, RunResult* out) {
  const std::string run_dir = dir / "run";
  std::filesystem::create_directories(run_dir);
  // The child learns its pid only after fork: it plants, then execs.
  // Planted first, then the shim set just before the exec: neither the
  // shell nor mkfifo/ln is traced.
  const std::string script =
      "p=\"" + run_dir + "/" + host_name() + "-r0-$$\"; " +
      (fifo ? "mkfifo \"$p.sst\"" : "ln -s '" + victim + "' \"$p.sst\"") + " || exit 9; " +
      "echo \"$p\" > '" + (dir / "base") + "'; export LD_PRELOAD='" + shim() +
      "' STALLSCOPE_OUT='" + run_dir + "' STALLSCOPE_RANK=0 STALLSCOPE_SAMPLE_MS=0; exec '" +
      helper("lifecycle") + "' read '" + data + "' 100";
  *out = run({"/bin/sh", "-c", script}, {}, /*preload=*/false, /*timeout_s=*/20);
  std::string base = slurp(dir / "base");
  while (!base.empty() && base.back() == '\n') base.pop_back();
  return base;
}

// Runs `lifecycle nofile FILE` under `ulimit -n LIMIT`, traced or not (the
// limit set by the shell before the exec, so the shim starts under it).
RunResult run_under_nofile(const TempDir& dir, const std::string& data, int limit, bool traced) {
  const std::string script =
      "ulimit -n " + std::to_string(limit) + " || exit 9; " +
      (traced ? "export LD_PRELOAD='" + shim() + "' STALLSCOPE_OUT='" + (dir / "run") + "'; "
              : std::string()) +
      "exec '" + helper("lifecycle") + "' nofile '" + data + "'";
  return run({"/bin/sh", "-c", script}, {}, /*preload=*/false, /*timeout_s=*/30);
}

// "FD n target" lines: descriptors the program did not open itself.
std::vector<std::pair<int, std::string>> other_fds(const std::string& out) {
  std::vector<std::pair<int, std::string>> fds;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("FD ", 0) != 0) continue;
    const size_t sp = line.find(' ', 3);
    fds.emplace_back(std::stoi(line.substr(3, sp - 3)),
                     sp == std::string::npos ? "" : line.substr(sp + 1));
  }
  return fds;
}

// A program started under the shim that runs until told to end: stdin,
// stdout and stderr are pipes (note_target wait FILE).
class Running {
 public:
  Running(const std::vector<std::string>& argv, std::map<std::string, std::string> env) {
    env.emplace("LD_PRELOAD", shim());
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
  }
  ~Running() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : {in_, out_, err_})
      if (fd >= 0) ::close(fd);
  }
  pid_t pid() const { return pid_; }
  // The first line on stdout ("READY <pid>"); "" at EOF.
  std::string first_line() {
    std::string line;
    char c;
    while (::read(out_, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  // Closes stdin (the program ends), collects the rest of its output.
  RunResult finish() {
    ::close(in_);
    in_ = -1;
    RunResult r;
    pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    int open_fds = 2;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (open_fds > 0 && std::chrono::steady_clock::now() < deadline) {
      if (::poll(fds, 2, 200) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[4096];
        const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n <= 0) {
          fds[i].fd = -1;
          --open_fds;
          continue;
        }
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
    if (open_fds > 0) ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) r.term_signal = WTERMSIG(st);
    return r;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  bool reaped_ = false;
};

std::string repro_helper(const std::string& name) { return build_dir() + "/tests/repro/" + name; }

// What the descriptors of `pid` name under `dir` ("<path> (deleted)" once
// removed).
std::vector<std::string> open_under(pid_t pid, const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(fd_dir, ec)) {
    char target[4096];
    const ssize_t n = ::readlink(e.path().c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string t(target, static_cast<size_t>(n));
    if (t.rfind(dir + "/", 0) == 0 || t.rfind(dir + " ", 0) == 0 || t == dir) found.push_back(t);
  }
  return found;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repro_run_dir)

BOOST_AUTO_TEST_CASE(fifo_at_run_control_never_hangs_the_program) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  std::filesystem::create_directories(dir / "run");
  BOOST_TEST_REQUIRE(::mkfifo((dir / "run/control").c_str(), 0644) == 0);
  const RunResult r = run({helper("lifecycle"), "read", data, "100"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 20);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                                << ": " << r.err);
  BOOST_TEST(r.err.find("control: not a regular file; ignored") != std::string::npos, r.err);
  BOOST_TEST(is_fifo(dir / "run/control"));
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
}

// Regression: "on" saved with a UTF-8 byte order mark (a Windows editor)
// was "expected 'on' or 'off', found '\xef\xbb\xbfon'; ignored".
BOOST_AUTO_TEST_CASE(a_control_file_with_a_byte_order_mark_is_obeyed) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  std::filesystem::create_directories(dir / "run");
  make_file(dir, "run/control", "\xEF\xBB\xBFon\r\n");
  const RunResult r =
      run({helper("lifecycle"), "read", data, "100"},
          {{"STALLSCOPE_OUT", dir / "run"}, {"STALLSCOPE_CAPTURE", "off"}}, true, 20);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("expected 'on' or 'off'") == std::string::npos, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  // Capture off at start (no window); the control file opened one — read
  // before the program's exit, however soon that comes.
  BOOST_TEST(t.of_kind(format::Kind::kCapture).size() == 1u);
}

BOOST_AUTO_TEST_CASE(fifo_at_run_json_never_hangs_the_program) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  std::filesystem::create_directories(dir / "run");
  BOOST_TEST_REQUIRE(::mkfifo((dir / "run/run.json").c_str(), 0644) == 0);
  const RunResult r = run({helper("lifecycle"), "read", data, "100"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 20);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(is_fifo(dir / "run/run.json"));  // another run's name: recorded elsewhere
  BOOST_TEST(load_run(dir / "run-2").files.size() == 1u);
}

BOOST_AUTO_TEST_CASE(fifo_at_the_trace_path_is_left_alone_and_the_next_name_taken) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  RunResult r;
  const std::string base = run_with_planted_trace_path(dir, data, true, "", &r);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST_REQUIRE(!base.empty());
  BOOST_TEST(is_fifo(base + ".sst"));
  BOOST_TEST(r.err.find("is not a regular file") != std::string::npos, r.err);
  reader::TraceReader tr(base + ".1.sst");
  reader::Event e;
  while (tr.next(e)) {
  }
  BOOST_TEST((tr.status() == reader::Status::kComplete));
  BOOST_TEST(load_run(dir / "run").files.size() == 1u);  // the FIFO is not listed
}

BOOST_AUTO_TEST_CASE(symlink_at_the_trace_path_is_never_followed) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const std::string victim = make_file(dir, "victim", "precious\n");
  ::chmod(victim.c_str(), 0600);
  RunResult r;
  const std::string base = run_with_planted_trace_path(dir, data, false, victim, &r);
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(slurp(victim) == "precious\n");
  BOOST_TEST(is_symlink(base + ".sst"));
  BOOST_TEST(std::filesystem::is_regular_file(base + ".1.sst"));
}

BOOST_AUTO_TEST_CASE(symlinked_progress_directory_is_not_followed) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  std::filesystem::create_directories(dir / "run");
  std::filesystem::create_directories(dir / "elsewhere");
  std::filesystem::create_directory_symlink(dir / "elsewhere", dir / "run/progress");
  const RunResult r = run({helper("lifecycle"), "read", data, "100"},
                          {{"STALLSCOPE_OUT", dir / "run"}, {"STALLSCOPE_PROGRESS", "on"}}, true,
                          20);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(std::filesystem::is_empty(dir / "elsewhere"));
  BOOST_TEST(r.err.find("progress: not a directory") != std::string::npos, r.err);
  BOOST_TEST(load_run(dir / "run").files.size() == 1u);
}

// RELIABILITY.md 44. RUN/progress replaced by a symlink while the program
// runs: the progress file was rewritten through it (a temp file created and
// renamed in the symlink's target, as root) at the next change — here the
// final "ended=1" line at exit. Now RUN/progress is opened without
// following, through the run directory's descriptor.
BOOST_AUTO_TEST_CASE(progress_directory_replaced_by_a_symlink_mid_run_is_not_followed) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const std::string run_dir = dir / "run";
  std::filesystem::create_directories(dir / "elsewhere");
  Running p({repro_helper("note_target"), "wait", data},
            {{"STALLSCOPE_OUT", run_dir}, {"STALLSCOPE_PROGRESS", "on"},
             {"STALLSCOPE_RANK", "0"}});
  BOOST_TEST_REQUIRE(p.first_line().rfind("READY ", 0) == 0u);
  BOOST_TEST_REQUIRE(std::filesystem::is_directory(run_dir + "/progress"));
  std::filesystem::rename(run_dir + "/progress", run_dir + "/progress.old");
  std::filesystem::create_directory_symlink(dir / "elsewhere", run_dir + "/progress");
  const RunResult r = p.finish();
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                                << ": " << r.err);
  BOOST_TEST(r.out == "DONE\n");
  std::string planted;
  for (const auto& e : std::filesystem::directory_iterator(dir / "elsewhere"))
    planted += e.path().filename().string() + " ";
  BOOST_TEST(planted.empty(), "created through the symlink: " << planted);
  BOOST_TEST(is_symlink(run_dir + "/progress"));
  const RunTrace t = load_run(run_dir);
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
}

// RELIABILITY.md 44. The run directory removed while the program runs: the
// recorder went on writing into its unlinked file (disk held up to the
// budget), without a word. Now the next flush sees the file has no name
// left: one note, tracing stops, the file and the directory are closed.
BOOST_AUTO_TEST_CASE(run_directory_removed_mid_run_stops_tracing_with_one_note) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const std::string run_dir = dir / "run";
  Running p({repro_helper("note_target"), "wait", data},
            {{"STALLSCOPE_OUT", run_dir}, {"STALLSCOPE_SAMPLE_MS", "0"}});
  BOOST_TEST_REQUIRE(p.first_line().rfind("READY ", 0) == 0u);
  BOOST_TEST_REQUIRE(!open_under(p.pid(), run_dir).empty());  // its trace file, at least
  std::filesystem::remove_all(run_dir);
  // Within a flush interval (100 ms); polled, never timed.
  std::vector<std::string> held = open_under(p.pid(), run_dir);
  for (int i = 0; i < 600 && !held.empty(); ++i) {
    ::usleep(50000);
    held = open_under(p.pid(), run_dir);
  }
  std::string names;
  for (const auto& h : held) names += h + "; ";
  BOOST_TEST(held.empty(), "still open: " << names);
  const RunResult r = p.finish();
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                                << ": " << r.err);
  BOOST_TEST(r.out == "DONE\n");
  BOOST_TEST(count(r.err, "stallscope: ") == 1u, r.err);
  BOOST_TEST(count(r.err, "was deleted (the run directory removed?); tracing stopped") == 1u,
             r.err);
  BOOST_TEST(!std::filesystem::exists(run_dir));  // nothing recreated
}

// RELIABILITY.md 44. The run directory moved away and a symlink put in its
// place while the program runs: recording went on into the moved directory
// without a word. Now the next flush sees the path no longer names the
// directory: one note, tracing stops, both closed; nothing is created
// through the symlink.
BOOST_AUTO_TEST_CASE(run_directory_replaced_mid_run_stops_tracing_with_one_note) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const std::string run_dir = dir / "run";
  std::filesystem::create_directories(dir / "elsewhere");
  Running p({repro_helper("note_target"), "wait", data},
            {{"STALLSCOPE_OUT", run_dir}, {"STALLSCOPE_SAMPLE_MS", "0"},
             {"STALLSCOPE_PROGRESS", "on"}});
  BOOST_TEST_REQUIRE(p.first_line().rfind("READY ", 0) == 0u);
  std::filesystem::rename(run_dir, dir / "moved");
  std::filesystem::create_directory_symlink(dir / "elsewhere", run_dir);
  std::vector<std::string> held = open_under(p.pid(), dir / "moved");
  for (int i = 0; i < 600 && !held.empty(); ++i) {
    ::usleep(50000);
    held = open_under(p.pid(), dir / "moved");
  }
  std::string names;
  for (const auto& h : held) names += h + "; ";
  BOOST_TEST(held.empty(), "still open: " << names);
  const RunResult r = p.finish();
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << " signal " << r.term_signal
                                                << ": " << r.err);
  BOOST_TEST(r.out == "DONE\n");
  BOOST_TEST(count(r.err, "stallscope: ") == 1u, r.err);
  BOOST_TEST(count(r.err, "the run directory was moved, removed or replaced; tracing stopped") ==
                 1u,
             r.err);
  BOOST_TEST(std::filesystem::is_empty(dir / "elsewhere"));
}

// 200 execs: 201 images, each with its own complete file and its own read;
// a file of another host that ends in the same -<pid>.sst stays as it was.
BOOST_AUTO_TEST_CASE(every_image_of_two_hundred_execs_keeps_its_trace) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const RunResult r = run({helper("lifecycle"), "execchain", data, "200", "plant"},
                          {{"STALLSCOPE_OUT", dir / "run"}, {"STALLSCOPE_SAMPLE_MS", "0"}}, true,
                          120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  std::string other;
  size_t ours = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "run")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("otherhost-", 0) == 0) other = name;
    if (name.ends_with(".sst") && name.rfind("otherhost-", 0) != 0) ++ours;
  }
  BOOST_TEST(std::regex_match(other, std::regex("otherhost-r0-[0-9]+\\.sst")), other);  // never renamed
  BOOST_TEST(slurp(dir / ("run/" + other)) == "another host's trace\n");
  BOOST_TEST(ours == 201u);
  // Every image's read is there once: N+1 bytes for N = 200 … 0.
  std::multiset<uint64_t> sizes;
  std::error_code ec;
  std::filesystem::remove(dir / ("run/" + other), ec);  // not a trace: keep load_run clean
  const RunTrace t = load_run(dir / "run");
  for (const FileInfo& fi : t.files) BOOST_TEST((fi.status == reader::Status::kComplete), fi.path);
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead))
    if (e.name == data) sizes.insert(e.io.bytes);
  BOOST_TEST(sizes.size() == 201u);
  BOOST_TEST(std::set<uint64_t>(sizes.begin(), sizes.end()).size() == 201u);
}

// The recorder's SIGTERM/SIGINT handler stays invisible: the program reads
// back SIG_DFL and what it set, its handler runs, SIG_IGN is really ignored
// (exec keeps it), and the default action still completes the file.
BOOST_AUTO_TEST_CASE(signal_dispositions_stay_the_programs_own) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const RunResult r = run({helper("lifecycle"), "signals", data},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 20);
  BOOST_TEST(r.term_signal == SIGTERM, r.out << r.err);
  BOOST_TEST(r.value("INT_DFL") == 1, r.out);
  BOOST_TEST(r.value("TERM_OLD_DFL") == 1, r.out);
  BOOST_TEST(r.value("TERM_HANDLED") == 1, r.out);
  BOOST_TEST(r.value("TERM_READBACK") == 1, r.out);
  BOOST_TEST(r.value("INT_IGN_REAL") == 1, r.out);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  size_t reads = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) reads += e.io.bytes == 123;
  BOOST_TEST(reads == 1u);
}

// RELIABILITY.md 36. Under `ulimit -n 8` the recorder's descriptors (trace
// file, sampler files) took the program's: its own open failed with EMFILE
// after fewer files than untraced. Now tracing is off, with a note.
BOOST_AUTO_TEST_CASE(a_tiny_nofile_limit_turns_tracing_off_and_leaves_every_descriptor) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const RunResult plain = run_under_nofile(dir, data, 8, false);
  BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.err);
  BOOST_TEST_REQUIRE(plain.value("OPENED") >= 1);
  const RunResult traced = run_under_nofile(dir, data, 8, true);
  BOOST_TEST_REQUIRE(traced.exit_code == 0, traced.err);
  BOOST_TEST(traced.value("OPENED") == plain.value("OPENED"), traced.out << traced.err);
  BOOST_TEST(traced.value("ERRNO") == EMFILE);
  BOOST_TEST(traced.err.find("stallscope: RLIMIT_NOFILE (ulimit -n) is 8; tracing is off so the "
                             "program keeps its descriptors (raise ulimit -n to at least 64)") !=
                 std::string::npos,
             traced.err);
  std::vector<int> plain_fds, traced_fds;  // (stdout and stderr name other pipes)
  for (const auto& fd : other_fds(plain.out)) plain_fds.push_back(fd.first);
  for (const auto& fd : other_fds(traced.out)) traced_fds.push_back(fd.first);
  BOOST_TEST(traced_fds == plain_fds, traced.out);
  BOOST_TEST(!std::filesystem::exists(dir / "run"));  // nothing recorded, nothing created
}

// Under `ulimit -n 64` tracing stays on with few descriptors, none of them
// low: the trace file sat at 3 (the program's first number) and the sampler
// kept a stat file per thread besides. Now the trace file and the sampler's
// kept files are in the upper half; per-thread files are opened per read.
BOOST_AUTO_TEST_CASE(a_small_nofile_limit_keeps_the_recorders_descriptors_few_and_high) {
  TempDir dir;
  const std::string data = make_file(dir, "data", std::string(4096, 'x'));
  const RunResult plain = run_under_nofile(dir, data, 64, false);
  BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.err);
  const RunResult traced = run_under_nofile(dir, data, 64, true);
  BOOST_TEST_REQUIRE(traced.exit_code == 0, traced.err);
  // The trace file and four sampler files, and one opened for a moment.
  BOOST_TEST(traced.value("OPENED") + 6 >= plain.value("OPENED"),
             traced.value("OPENED") << " vs " << plain.value("OPENED") << " untraced");
  bool trace_seen = false;
  for (const auto& [fd, target] : other_fds(traced.out)) {
    const bool trace = target.ends_with(".sst");
    const bool kept = trace || ((target.rfind("/proc/", 0) == 0 || target.rfind("/sys/", 0) == 0) &&
                                target.find("/task/") == std::string::npos);
    trace_seen = trace_seen || trace;
    if (kept) BOOST_TEST(fd >= 32, "descriptor " << fd << " (" << target << ") is low");
  }
  BOOST_TEST(trace_seen, traced.out);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 1u);
  BOOST_TEST((t.files[0].status == reader::Status::kComplete));
  long long reads = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead))
    reads += e.name == data && e.io.bytes == 8;
  BOOST_TEST(reads == traced.value("OPENED"));  // every read of the program recorded
}

BOOST_AUTO_TEST_SUITE_END()
