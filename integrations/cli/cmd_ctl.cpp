// `stallscope ctl RUN on|off|status`: switches capture in every process of a
// running job through the run directory's control file (the recorder polls
// it every 100 ms), or shows each process's step progress.
#include <sys/stat.h>
#include <unistd.h>

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

int run_ctl(const CtlOptions& o) {
  struct stat st {};
  if (::stat((o.run_dir + "/run.json").c_str(), &st) != 0) {
    std::cerr << "stallscope ctl: " << o.run_dir
              << " is not a run directory (no run.json): give the directory the job records into\n";
    return kExitInput;
  }
  if (o.action == "status") return show_status(o.run_dir);
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
      "Exit status: 0 done, 1 not a run directory or unwritable control file, 2 usage error.");
  return {sub, [o] { return run_ctl(*o); }};
}

}  // namespace stallscope::cli
