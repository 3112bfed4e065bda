// `stallscope tune [--trials K] [--steps N] [--headspace] -- CMD ARGS…`: runs
// the job once as is, then with the top remedy's --set, then with the new
// report's top remedy, and so on (analyzer/tune.hpp decides), each trial a
// `stallscope run --exit-after-window` of its own into OUT/trial-N; prints
// the trials, the best command line and the lines of the program to edit,
// and leaves OUT/tune.json and OUT/tune.txt (docs/attach.md, "Tuning").
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_files.hpp"
#include "cmd_run.hpp"
#include "commands.hpp"
#include "stallscope/analyzer/tune.hpp"

extern char** environ;

namespace stallscope::cli {

namespace {

namespace fs = std::filesystem;
namespace tune = analyzer::tune;

struct TuneArgs {
  int trials = 4;
  int64_t steps = 30;
  int64_t start_step = 5;
  std::string out;
  std::string headspace;  // "" none; else the batch count ("8" by default)
  std::vector<std::string> sets;
  double trial_timeout_s = 900;
  std::vector<std::string> command;
};

constexpr size_t kMaxReport = size_t{256} << 20;

std::string shell_word(const std::string& a) {
  const bool plain = !a.empty() && a.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789_./:=@%+,-") == std::string::npos;
  if (plain) return a;
  std::string out = "'";
  for (char ch : a) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string command_line(const std::vector<std::string>& settings,
                         const std::vector<std::string>& cmd) {
  std::string out = "stallscope run";
  for (const auto& s : settings) out += " --set " + shell_word(s);
  out += " --";
  for (const auto& a : cmd) out += " " + shell_word(a);
  return out;
}

std::string describe_status(int st) {
  if (WIFSIGNALED(st)) {
    const int sig = WTERMSIG(st);
    return "killed by SIG" + std::string(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  }
  const int rc = WEXITSTATUS(st);
  if (rc > 128 && rc < 128 + 65) {
    const char* name = sigabbrev_np(rc - 128);
    return "exit status " + std::to_string(rc) + " (the job killed by SIG" + (name ? name : "?") + ")";
  }
  return "exit status " + std::to_string(rc);
}

// The line of a trial's log that says what went wrong, for the table: the
// job's last exception ("RuntimeError: DataLoader worker … Bus error"), else
// its last line before stallscope's report.
std::string log_tail(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last, error;
  auto is_error = [](const std::string& l) {
    const size_t colon = l.find(':');
    const std::string head = l.substr(0, colon);
    return (colon != std::string::npos && head.find(' ') == std::string::npos &&
            (head.ends_with("Error") || head.ends_with("Exception"))) ||
           l.find("Bus error") != std::string::npos ||
           l.find("Segmentation fault") != std::string::npos;
  };
  while (std::getline(in, line)) {
    if (line.starts_with("stallscope report")) break;  // the report of what was recorded
    if (line.empty() || line.starts_with("stallscope run:") || line.starts_with("warning: ")) continue;
    last = line;
    if (is_error(line)) error = line;
  }
  std::string out = error.empty() ? last : error;
  if (out.size() > 200) out = out.substr(0, 197) + "...";
  return out;
}

class TrialRunner {
 public:
  TrialRunner(const TuneArgs& a, fs::path out) : a_(a), out_(std::move(out)) {}

  // Runs `stallscope run … -- CMD` into OUT/<name> with the settings.
  tune::Measurement run(const std::string& name, const std::vector<std::string>& settings,
                        bool headspace) {
    tune::Measurement m;
    const fs::path dir = out_ / name;
    const fs::path log = out_ / (name + ".log");
    std::vector<std::string> argv = {self_, "run", "--out", dir.string(), "--steps",
                                     std::to_string(a_.steps), "--start-step",
                                     std::to_string(a_.start_step), "--exit-after-window"};
    if (headspace) argv.push_back("--headspace=" + a_.headspace);
    for (const auto& s : settings) argv.insert(argv.end(), {"--set", s});
    argv.push_back("--");
    argv.insert(argv.end(), a_.command.begin(), a_.command.end());
    const int st = spawn_and_wait(argv, log);
    if (st < 0) {
      m.failure = "could not be started: " + std::string(std::strerror(-st));
      return m;
    }
    if (timed_out_) {
      m.failure = "no report after " + fmt_s(a_.trial_timeout_s) + " (--trial-timeout); see " +
                  log.string();
      return m;
    }
    // (No --expect is passed: a 3 is the job's own status.)
    const bool clean = WIFEXITED(st) && WEXITSTATUS(st) == kExitOk;
    if (!clean) {
      const std::string tail = log_tail(log);
      m.failure = describe_status(st) + (tail.empty() ? "" : ": " + tail) + " (" + log.string() + ")";
      return m;
    }
    std::string text;
    std::string error = read_input_file((dir / "report.json").string(), &text, kMaxReport);
    if (error.empty() && !tune::measurement_from_report(text, &m, &error))
      error = (dir / "report.json").string() + ": " + error;
    if (!error.empty()) {
      m = {};
      m.failure = error;
    }
    return m;
  }

 private:
  static std::string fmt_s(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f s", s);
    return b;
  }

  int spawn_and_wait(const std::vector<std::string>& argv, const fs::path& log) {
    timed_out_ = false;
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "STALLSCOPE_TRIAL=", 17) != 0) env.emplace_back(*e);
    env.emplace_back("STALLSCOPE_TRIAL=1");
    std::vector<char*> av, ev;
    for (const auto& s : argv) av.push_back(const_cast<char*>(s.c_str()));
    av.push_back(nullptr);
    for (const auto& s : env) ev.push_back(const_cast<char*>(s.c_str()));
    ev.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    const sigset_t dflt = child_signal_defaults();
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, self_.c_str(), &fa, &attr, av.data(), ev.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return -rc;
    using clock = std::chrono::steady_clock;
    const auto until = clock::now() + std::chrono::duration<double>(a_.trial_timeout_s);
    const auto kill_at = until + std::chrono::seconds(30);
    int st = 0;
    for (;;) {
      const pid_t w = ::waitpid(pid, &st, WNOHANG);
      if (w == pid) return st;
      if (w < 0 && errno != EINTR) return -errno;
      const auto now = clock::now();
      if (!timed_out_ && now > until) {
        // `stallscope run` forwards SIGTERM to the job and exits after it.
        timed_out_ = true;
        ::kill(pid, SIGTERM);
      } else if (timed_out_ && now > kill_at) {
        ::kill(pid, SIGKILL);  // not reaped yet: the pid is still ours
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  const TuneArgs& a_;
  fs::path out_;
  std::string self_ = fs::read_symlink("/proc/self/exe").string();
  bool timed_out_ = false;
};

std::string trial_dir_name(int trial, int attempt) {
  return "trial-" + std::to_string(trial) + (attempt > 0 ? "-repeat" : "");
}

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f ms", v);
  return b;
}

void write_table(std::ostream& o, const tune::Result& r, double headspace_ms,
                 const std::string& headspace_failure) {
  if (headspace_ms > 0)
    o << "headspace (data for free): step p50 " << ms(headspace_ms)
      << ": no input setting can bring the step below it\n";
  else if (!headspace_failure.empty())
    o << "headspace: not measured (" << headspace_failure << ")\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-5s %-11s %-9s %-12s %-15s %s\n", "trial", "step p50",
                "p90-p10", "predicted", "outcome", "setting");
  o << line;
  for (const auto& t : r.trials) {
    std::string setting = t.index == 0 ? (t.settings.empty() ? "(as is)" : "(the --set given)") : "";
    for (const auto& s : t.added) setting += (setting.empty() ? "" : " ") + s;
    if (t.run_p50s.size() > 1) setting += "  [2 runs]";
    const std::string step = t.m.ok || t.run_p50s.size() > 0 ? ms(t.p50_ms) : "-";
    const std::string spread = t.m.ok ? ms(t.m.spread_ms) : "-";
    const std::string pred = t.index == 0 ? "-" : (t.bound ? ">= " : "") + ms(t.predicted_ms);
    std::snprintf(line, sizeof line, "%-5d %-11s %-9s %-12s %-15s %s\n", t.index, step.c_str(),
                  spread.c_str(), pred.c_str(),
                  t.index == 0 && t.outcome == tune::Outcome::kFailed ? "failed"
                                                                      : tune::outcome_name(t.outcome),
                  setting.c_str());
    o << line;
    if (!t.delivered.empty()) o << "      " << t.remedy_title << ": " << t.delivered << "\n";
    if (t.outcome == tune::Outcome::kFailed) o << "      " << t.m.failure << "\n";
  }
  o << "stopped: " << r.stop_reason << "\n";
}

nlohmann::json trial_json(const tune::Trial& t, const std::vector<std::string>& dirs) {
  nlohmann::json j = {{"index", t.index}, {"settings", t.settings}, {"added", t.added},
                      {"remedy_id", t.remedy_id}, {"remedy_title", t.remedy_title},
                      {"edit", t.edit}, {"based_on", t.based_on},
                      {"based_on_ms", t.based_on_ms}, {"predicted_step_ms", t.predicted_ms},
                      {"bound", t.bound}, {"step_p50_ms", t.p50_ms}, {"run_p50_ms", t.run_p50s},
                      {"step_mean_ms", t.mean_ms},
                      {"spread_ms", t.m.spread_ms}, {"se_ms", t.m.se_ms},
                      {"steady_steps", t.m.steps}, {"noise_ms", t.noise_ms},
                      {"outcome", tune::outcome_name(t.outcome)}, {"delivered", t.delivered},
                      {"failure", t.m.failure}, {"summary", t.m.summary}, {"run_dirs", dirs}};
  return j;
}

int run_tune(TuneArgs a) {
  if (!a.command.empty() && a.command.front() == "--") a.command.erase(a.command.begin());
  if (a.command.empty()) {
    std::cerr << "stallscope tune: no command given (stallscope tune [options] -- CMD ARGS...)\n";
    return kExitUsage;
  }
  if (run::launcher_rank().under_launcher) {
    std::cerr << "stallscope tune: started by a launcher (one per rank); run it outside: "
                 "stallscope tune -- torchrun ... train.py\n";
    return kExitUsage;
  }
  if (!a.headspace.empty()) {
    char* end = nullptr;
    const long k = std::strtol(a.headspace.c_str(), &end, 10);
    if (end == a.headspace.c_str() || *end != '\0' || k < 1 || k > 100000) {
      std::cerr << "stallscope tune: --headspace=" << a.headspace
                << ": expected a batch count from 1 to 100000\n";
      return kExitUsage;
    }
  }
  const std::vector<run::TriedSetting> checked = run::check_setting_args(a.sets);
  if (checked.size() != a.sets.size()) return kExitUsage;
  if (a.out.empty()) {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    a.out = std::string("stallscope-tune-") + stamp;
  }
  const fs::path out = fs::absolute(a.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    std::cerr << "stallscope tune: " << out.string()
              << " is not empty (it may hold an earlier tuning): choose another --out\n";
    return kExitUsage;
  }
  fs::create_directories(out, ec);
  if (ec) {
    std::cerr << "stallscope tune: cannot create " << out.string() << ": " << ec.message() << "\n";
    return kExitInput;
  }
  std::cerr << "stallscope tune: up to " << a.trials << " trial(s) of " << a.steps
            << " steps each after " << a.start_step << " warm-up steps, into " << out.string()
            << " (each trial runs with STALLSCOPE_TRIAL=1 and ends after its window)\n";

  TrialRunner runner(a, out);
  tune::Options opt;
  opt.trials = a.trials;
  for (const auto& t : checked) opt.initial.push_back(t.item);
  double headspace_ms = 0;
  std::string headspace_failure;
  if (!a.headspace.empty()) {
    std::cerr << "stallscope tune: headspace: the job with its first " << a.headspace
              << " batches replayed (data for free): running\n";
    const tune::Measurement h = runner.run("headspace", opt.initial, true);
    if (h.ok) {
      headspace_ms = h.p50_ms;
      opt.ceiling_ms = h.p50_ms;
      std::cerr << "stallscope tune: headspace: step p50 " << ms(h.p50_ms) << "\n";
    } else {
      headspace_failure = h.failure;
      std::cerr << "stallscope tune: headspace: failed (" << h.failure
                << "); tuning without a ceiling\n";
    }
  }
  std::map<int, std::vector<std::string>> trial_dirs;
  const tune::Result r = tune::search(
      opt,
      [&](const tune::Request& q) {
        const std::string name = trial_dir_name(q.trial, q.attempt);
        trial_dirs[q.trial].push_back((out / name).string());
        return runner.run(name, q.settings, false);
      },
      [](const std::string& line) { std::cerr << "stallscope tune: " << line << "\n"; });

  std::ostringstream table;
  write_table(table, r, headspace_ms, headspace_failure);
  if (r.best >= 0) {
    const tune::Trial& best = r.trials[size_t(r.best)];
    const tune::Trial& base = r.trials[0];
    table << "best: trial " << best.index << ", step p50 " << ms(best.p50_ms);
    if (best.index != 0 && best.p50_ms > 0)
      table << " against " << ms(base.p50_ms) << " as is ("
            << std::lround(100 * (base.p50_ms - best.p50_ms) / base.p50_ms) << " % less)";
    table << "\n  " << command_line(best.settings, a.command) << "\n";
    // The edits, along the trials that led to the best one.
    std::vector<std::string> edits;
    for (int i = best.index; i > 0; i = r.trials[size_t(i)].based_on)
      if (!r.trials[size_t(i)].edit.empty()) edits.insert(edits.begin(), r.trials[size_t(i)].edit);
    for (const auto& e : edits) table << "  in the program: " << e << "\n";
    if (best.index == 0) table << "  (no trial beat the job as is)\n";
  }
  table << "run directories: " << out.string() << "/trial-N (stallscope diff " << out.string()
        << " explains each trial's change part by part)\n";
  std::cout << table.str();

  nlohmann::json doc = {{"schema", "stallscope.tune"}, {"schema_version", 1},
                        {"command", a.command}, {"steps", a.steps},
                        {"start_step", a.start_step}, {"trials_allowed", a.trials},
                        {"runs", r.runs}, {"best", r.best}, {"stop_reason", r.stop_reason}};
  doc["headspace"] = {{"step_p50_ms", headspace_ms}, {"failure", headspace_failure},
                      {"run_dir", a.headspace.empty() ? "" : (out / "headspace").string()}};
  doc["trials"] = nlohmann::json::array();
  for (const auto& t : r.trials) doc["trials"].push_back(trial_json(t, trial_dirs[t.index]));
  if (r.best >= 0) doc["best_command"] = command_line(r.trials[size_t(r.best)].settings, a.command);
  bool written = true;
  // (Names from the job's log may hold invalid UTF-8: replaced, never thrown.)
  const std::string json_text =
      doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  for (const auto& [name, text] :
       {std::pair{"tune.json", json_text}, std::pair{"tune.txt", table.str()}}) {
    const std::string err = write_output((out / name).string(), OutputOwner::kStallscope,
                                         [&](std::ostream& o) { o << text; });
    if (!err.empty()) {
      std::cerr << "stallscope tune: cannot write " << err << "\n";
      written = false;
    }
  }
  if (!stdout_complete() || !written) return kExitInput;
  return r.best >= 0 ? kExitOk : kExitInput;
}

}  // namespace

Command add_tune_command(CLI::App& parent) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* sub = parent.add_subcommand(
      "tune", "Find the best setting: try the reports' remedies one after another and measure");
  sub->add_option("--trials", a->trials, "Runs after the first (repeats included)")
      ->check(CLI::Range(1, 50))
      ->capture_default_str();
  sub->add_option("--steps", a->steps, "Steps in each trial's window")
      ->check(CLI::Range(int64_t{3}, int64_t{100000}))
      ->capture_default_str();
  sub->add_option("--start-step", a->start_step, "Warm-up steps before each window")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--out", a->out, "Directory for the trials (default: stallscope-tune-<time>)")
      ->type_name("DIR");
  sub->add_flag("--headspace{8}", a->headspace,
                "First measure the step with data for free (stallscope run --headspace=K): a "
                "ceiling no input setting can beat")
      ->type_name("K");
  sub->add_option("--set", a->sets, "A setting every trial starts from (as stallscope run --set)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  sub->add_option("--trial-timeout", a->trial_timeout_s, "Seconds a trial may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("CMD", a->command, "The command to run, after --")->required();
  sub->footer(
      "Each trial is `stallscope run --exit-after-window` of its own, with STALLSCOPE_TRIAL=1 in "
      "the job's environment (a program may skip checkpoints or logging then).\n"
      "Stops when the best predicted gain left is below 5 % of the step, a trial is worse beyond "
      "the run-to-run noise, the step is within 5 % of the headspace, or the trials are spent.\n"
      "Under a launcher, tune the whole command: stallscope tune -- torchrun --nproc-per-node 8 "
      "train.py (the settings reach every rank in STALLSCOPE_SET; rank 0's steps are measured).\n"
      "Exit status: 0; 1 when the first run failed or an output could not be written; 2 usage.");
  return {sub, [a] { return run_tune(*a); }};
}

}  // namespace stallscope::cli
