// `stallscope ctl RUN on|off|status`: switches capture in every process of a
// running job through the run directory's control file (the recorder polls
// it every 100 ms), or shows each process's step progress.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cmd_run.hpp"
#include "commands.hpp"

namespace stallscope::cli {
namespace {

struct CtlOptions {
  std::string run_dir;
  std::string action;
};

int show_status(const std::string& dir) {
  const auto progress = run::read_progress(dir);
  if (progress.empty()) {
    std::cout << dir
              << ": no step progress (not started by 'stallscope run', or nothing "
                 "recorded yet)\n";
    return kExitOk;
  }
  for (const auto& p : progress)
    std::cout << p.base << ": steps " << p.steps << ", capture " << (p.capture ? "on" : "off")
              << ", windows closed " << p.windows_closed << (p.ended ? ", ended" : "") << "\n";
  return kExitOk;
}

// The pid of a trace file "<host>-r<rank>-<pid>.sst" or a ring segment
// "<host>-r<rank>-<pid>.segN.sst" (0: not such a name), and its base.
int pid_of_trace_name(const std::string& name, std::string* base) {
  if (name.size() < 5 || name.compare(name.size() - 4, 4, ".sst") != 0) return 0;
  *base = name.substr(0, name.size() - 4);
  if (const size_t seg = base->rfind(".seg"); seg != std::string::npos) base->resize(seg);
  const size_t dash = base->rfind('-');
  if (dash == std::string::npos || dash + 1 == base->size()) return 0;
  char* end = nullptr;
  const long pid = std::strtol(base->c_str() + dash + 1, &end, 10);
  return *end == '\0' && pid > 0 && pid <= INT32_MAX ? static_cast<int>(pid) : 0;
}

// Processes that may still record into `dir`, for a run without progress
// files (a job not started by `stallscope run`): those of its trace files
// whose process is alive on this host, or of another host (not knowable).
size_t recording_by_trace_files(const std::string& dir) {
  size_t n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    std::string base;
    const int pid = pid_of_trace_name(e->d_name, &base);
    if (pid <= 0) continue;
    struct stat st {};
    const std::string path = dir + "/" + e->d_name;
    if (::stat(path.c_str(), &st) != 0) continue;
    const double written = double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
    if (!run::on_this_host(base) || !run::process_gone(pid, written)) ++n;
  }
  ::closedir(d);
  return n;
}

// "" when a process records into `dir`, else why none is known to: a
// switch written then would change nothing now and would wait in `control`
// for whatever job records there next.
std::string nobody_recording(const std::string& dir) {
  const auto progress = run::read_progress(dir);
  size_t live = 0;
  for (const auto& p : progress) live += p.ended ? 0 : 1;
  if (live > 0) return "";
  if (!progress.empty())
    return "every process in " + dir + "/progress/ (" + std::to_string(progress.size()) + ") ended";
  if (recording_by_trace_files(dir) > 0) return "";
  return "no progress file, and no trace file of a running process";
}

int run_ctl(const CtlOptions& o) {
  struct stat st {};
  if (::stat((o.run_dir + "/run.json").c_str(), &st) != 0) {
    std::cerr << "stallscope ctl: " << o.run_dir
              << " is not a run directory (no run.json): give the directory the job records into\n";
    return kExitInput;
  }
  if (o.action == "status") return show_status(o.run_dir);
  if (const std::string why = nobody_recording(o.run_dir); !why.empty()) {
    std::cerr << "stallscope ctl: no process of " << o.run_dir << " is recording (" << why
              << "); capture not switched, " << o.run_dir << "/control left as it was\n";
    return kExitInput;
  }
  const std::string err = run::write_control(o.run_dir, o.action == "on");
  if (!err.empty()) {
    std::cerr << "stallscope ctl: " << err << "\n";
    return kExitInput;
  }
  std::cout << "capture " << o.action << " requested in " << o.run_dir
            << " (every process applies it within 100 ms)\n";
  return kExitOk;
}

}  // namespace

Command add_ctl_command(CLI::App& parent) {
  auto o = std::make_shared<CtlOptions>();
  CLI::App* sub = parent.add_subcommand(
      "ctl", "Switch capture on or off in a running job, or show its progress");
  sub->add_option("RUN", o->run_dir, "The job's run directory")->required();
  sub->add_option("ACTION", o->action, "on, off or status")
      ->required()
      ->check(CLI::IsMember({"on", "off", "status"}));
  sub->footer(
      "on/off: a process of RUN must be recording (RUN/progress/ shows one that has not ended;\n"
      "without progress files, a trace file whose process runs). Exit status: 0 done, 1 not a\n"
      "run directory, no process recording there, or an unwritable control file, 2 usage error.");
  return {sub, [o] { return run_ctl(*o); }};
}

}  // namespace stallscope::cli
