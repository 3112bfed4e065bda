// Ending the job after the capture window (`stallscope run
// --exit-after-window`). `stallscope run` is a child subreaper, so every
// process the job starts stays its descendant: a data-loader worker whose
// parent died, a daemon that called setsid() and double-forked, the ranks
// under a launcher. The job is found by walking /proc's parent links from
// this process, and ended by signalling each process in it until none is
// left; every process reparented here is reaped.
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cmd_run.hpp"

namespace stallscope::cli::run {
namespace {

constexpr int kPollMs = 20;
constexpr double kKillWaitS = 30;  // for processes in uninterruptible sleep

struct ProcEntry {
  pid_t ppid = 0;
  bool zombie = false;
};

// "pid (comm) S ppid …": comm may hold spaces and parentheses, so the
// fields are read after its last ')'.
bool read_stat(pid_t pid, ProcEntry* e) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(text.substr(close + 1));
  char state = 0;
  long ppid = 0;
  if (!(rest >> state >> ppid)) return false;
  e->ppid = static_cast<pid_t>(ppid);
  e->zombie = state == 'Z' || state == 'X';
  return true;
}

std::map<pid_t, ProcEntry> process_table() {
  std::map<pid_t, ProcEntry> table;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return table;
  while (dirent* de = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(de->d_name, &end, 10);
    ProcEntry e;
    if (pid > 0 && *end == '\0' && read_stat(static_cast<pid_t>(pid), &e))
      table[static_cast<pid_t>(pid)] = e;
  }
  ::closedir(d);
  return table;
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Sends `sig` to every live process of the job, once to each unless
// `again`; records them in *sent.
void signal_all(int sig, bool again, std::set<pid_t>* sent) {
  for (pid_t p : job_processes(false)) {
    if (!sent->insert(p).second && !again) continue;
    ::kill(p, sig);
  }
}

}  // namespace

std::string become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return std::strerror(errno);
  return "";
}

std::vector<pid_t> job_processes(bool with_zombies) {
  const auto table = process_table();
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [pid, e] : table) children[e.ppid].push_back(pid);
  std::vector<pid_t> out, frontier = {::getpid()};
  std::set<pid_t> seen = {::getpid()};
  while (!frontier.empty()) {
    const pid_t p = frontier.back();
    frontier.pop_back();
    for (pid_t c : children[p]) {
      if (!seen.insert(c).second) continue;
      frontier.push_back(c);
      if (with_zombies || !table.at(c).zombie) out.push_back(c);
    }
  }
  return out;
}

void reap_children(pid_t child, int* status, bool* child_done) {
  for (;;) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p <= 0) return;  // none exited, or no child left (ECHILD)
    if (p == child && !*child_done) {
      *status = st;
      *child_done = true;
    }
  }
}

EndResult end_job(pid_t child, bool term, double grace_s, int* status, bool* child_done) {
  EndResult r;
  if (term) {
    std::set<pid_t> termed;
    signal_all(SIGTERM, false, &termed);
    r.terminated = termed.size();
    const double until = now_s() + grace_s;
    while (now_s() < until && !job_processes(false).empty()) {
      reap_children(child, status, child_done);
      ::usleep(kPollMs * 1000);
    }
  }
  // A process forking while it is killed leaves an orphan, reparented here
  // and found by the next pass: repeat until the job is empty.
  std::set<pid_t> killed;
  const double until = now_s() + kKillWaitS;
  for (;;) {
    signal_all(SIGKILL, true, &killed);
    reap_children(child, status, child_done);
    if (job_processes(true).empty()) break;
    if (now_s() >= until) {
      r.left = job_processes(true);
      break;
    }
    ::usleep(kPollMs * 1000);
  }
  r.killed = killed.size();
  return r;
}

}  // namespace stallscope::cli::run
