// The capture window of `stallscope run`, driven by the progress files the
// recorder writes (RUN/progress/<file base>, STALLSCOPE_PROGRESS=on) and
// closed through the run directory's control file.
//
// Why progress files and not the traces: reading growing trace files would
// re-parse megabytes per poll; the recorder's flusher already sees every
// record it writes, so it counts steps there (never on the recording path)
// and rewrites a one-line file at most once per flush when a count changed.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "cli_files.hpp"
#include "cmd_run.hpp"
#include "stallscope/internal/run_identity.hpp"

namespace stallscope::cli::run {
namespace {

// "<host>-r<rank>-<pid>" -> rank; "<host>-launcher-<pid>" -> -1.
int rank_of_base(const std::string& base) {
  const size_t dash = base.rfind('-');
  if (dash == std::string::npos || dash == 0) return 0;
  const size_t prev = base.rfind('-', dash - 1);
  if (prev == std::string::npos) return 0;
  const std::string mid = base.substr(prev + 1, dash - prev - 1);
  if (mid == "launcher") return -1;
  if (mid.size() < 2 || mid[0] != 'r') return 0;
  return std::atoi(mid.c_str() + 1);
}

bool parse_progress(const std::string& text, ProcessProgress& p) {
  std::istringstream in(text);
  std::string kv;
  int fields = 0;
  while (in >> kv) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "pid")
      p.pid = std::atoi(v.c_str());
    else if (k == "steps")
      p.steps = std::strtoull(v.c_str(), nullptr, 10), ++fields;
    else if (k == "windows_closed")
      p.windows_closed = std::strtoull(v.c_str(), nullptr, 10), ++fields;
    else if (k == "capture")
      p.capture = v == "on", ++fields;
    else if (k == "ended")
      p.ended = v == "1", ++fields;
    else if (k == "step_ms")
      p.step_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "wait_ms")
      p.wait_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "kernel_ms")
      p.kernel_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "copy_ms")
      p.copy_ms = std::strtod(v.c_str(), nullptr);
    else if (k == "comm_ms")
      p.comm_ms = std::strtod(v.c_str(), nullptr);
  }
  return fields == 4;
}

// A process of this host that is gone without its final flush (SIGKILL,
// exec into an untraced program) will never write its window-end record.
// `written_s`: when its progress file was last written.
bool gone_from_this_host(const ProcessProgress& p, double written_s) {
  return on_this_host(p.base) && process_gone(p.pid, written_s);
}

// When `path` was last written (realtime seconds; 0 when unknown).
double mtime_s(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
}

// When process `pid` started (realtime seconds), from /proc/PID/stat's
// start time (clock ticks since boot); 0 when unknown. Also whether it is a
// zombie.
double start_time_s(int pid, bool* zombie) {
  std::string text;
  if (!read_input_file("/proc/" + std::to_string(pid) + "/stat", &text, 4096).empty()) return 0;
  // "pid (comm) S ppid …": comm may hold spaces and ')', so fields are
  // counted after its last ')'; the start time is field 22, the 20th after.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  unsigned long long ticks = 0;
  for (int i = 1; i <= 20 && rest >> field; ++i) {
    if (i == 1) *zombie = field == "Z" || field == "X";
    if (i == 20) ticks = std::strtoull(field.c_str(), nullptr, 10);
  }
  timespec boot{}, real{};
  if (ticks == 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0 ||
      ::clock_gettime(CLOCK_REALTIME, &real) != 0)
    return 0;
  const double booted_at =
      double(real.tv_sec - boot.tv_sec) + double(real.tv_nsec - boot.tv_nsec) * 1e-9;
  return booted_at + double(ticks) / double(::sysconf(_SC_CLK_TCK));
}

std::string read_small(const std::string& path) {
  std::string text;
  // A progress file is one short line; a FIFO or anything larger is no
  // progress file (never waited on).
  return read_input_file(path, &text, 512).empty() ? text : "";
}

}  // namespace

bool on_this_host(const std::string& base) {
  static const std::string host = [] {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    std::string h = sys::sanitize_path_component(name);
    return (h.empty() ? std::string("host") : h) + "-";
  }();
  return base.rfind(host, 0) == 0;
}

bool process_gone(int pid, double written_s) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  bool zombie = false;
  const double started = start_time_s(pid, &zombie);
  // The process that wrote at written_s was running then: one started
  // later holds its pid by reuse. The slack covers the start time's clock
  // ticks and the file time's granularity.
  constexpr double kSlackS = 0.25;
  return zombie || (started > 0 && written_s > 0 && started > written_s + kSlackS);
}

std::vector<ProcessProgress> read_progress(const std::string& run_dir) {
  std::vector<ProcessProgress> out;
  const std::string dir = run_dir + "/progress";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name[0] == '.' || name.size() < 4 || name.compare(name.size() - 4, 4, ".tmp") == 0)
      continue;
    ProcessProgress p;
    p.base = name;
    p.rank = rank_of_base(name);
    const std::string path = dir + "/" + name;
    if (!parse_progress(read_small(path), p)) continue;
    if (!p.ended && gone_from_this_host(p, mtime_s(path))) p.ended = true;
    out.push_back(p);
  }
  ::closedir(d);
  return out;
}

std::string write_control(const std::string& run_dir, bool on) {
  return write_control_word(run_dir, on ? "on" : "off");
}

std::string write_control_word(const std::string& run_dir, const std::string& word) {
  // Written to a temporary and renamed: the recorder never reads a
  // half-written file.
  return write_output(run_dir + "/control", OutputOwner::kStallscope,
                      [&word](std::ostream& out) { out << word << "\n"; });
}

bool files_ended(const std::vector<ProcessProgress>& p) {
  for (const auto& x : p)
    if (!x.ended) return false;
  return true;
}

bool Window::want_open(double now_s) const {
  return opt_.start_after_s > 0 && now_s - t0_ >= opt_.start_after_s;
}

bool Window::want_close(double now_s, const std::vector<ProcessProgress>& p) {
  for (const auto& x : p) max_steps_ = std::max(max_steps_, x.steps);
  if (max_steps_ > 0) step_based_ = true;
  // Step M+N has ended once step M+N+1 began (steps counted from 0).
  if (step_based_) return max_steps_ > static_cast<uint64_t>(opt_.start_step + opt_.steps);
  return now_s - t0_ >= opt_.start_after_s + opt_.duration_s;
}

std::string Window::describe() const {
  std::ostringstream s;
  if (step_based_) {
    s << "capture window: steps 0 to " << opt_.start_step + opt_.steps << " (--start-step "
      << opt_.start_step << " --steps " << opt_.steps
      << "; a few more may be recorded while the close reaches every process); the job went on "
         "untraced, so its files are reported as cut";
  } else {
    s << "capture window: time based, " << opt_.duration_s << " s";
    if (opt_.start_after_s > 0) s << " from " << opt_.start_after_s << " s after start";
    s << " (no step source appeared: no step API call, optimizer hook or step range)";
  }
  return s.str();
}

bool windows_on_disk(const std::vector<ProcessProgress>& p, int world) {
  std::set<int> ranks;
  for (const auto& x : p) {
    if (x.windows_closed == 0 && !x.ended) return false;
    if (x.rank >= 0) ranks.insert(x.rank);
  }
  return world <= 1 || static_cast<int>(ranks.size()) >= world;
}

}  // namespace stallscope::cli::run
