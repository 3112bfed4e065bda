// The environment `stallscope run` gives its command: the preload shim on
// LD_PRELOAD, the claimed run directory, the recorder's progress file, and
// for Python commands the sitecustomize hooks on PYTHONPATH.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "cmd_run.hpp"
#include "stallscope/internal/proc_text.hpp"
#include "stallscope/internal/process_facts.hpp"
#include "stallscope/internal/run_identity.hpp"

extern char** environ;

namespace stallscope::cli::run {
namespace {

namespace fs = std::filesystem;

fs::path self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The current environment as an ordered map (later edits replace values).
std::map<std::string, std::string> current_env() {
  std::map<std::string, std::string> m;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

// Appends `item` to a `sep`-separated list variable unless already there.
void append_list(std::map<std::string, std::string>& env, const std::string& name,
                 const std::string& item, char sep, bool front) {
  std::string& v = env[name];
  if (v.find(item) != std::string::npos) return;
  if (v.empty())
    v = item;
  else
    v = front ? item + sep + v : v + sep + item;
}

// /proc/PID/stat field 22 (the start time in clock ticks), 0 when unreadable.
uint64_t start_ticks_of(int pid) {
  std::string text;
  if (!sys::read_text_file("/proc/" + std::to_string(pid) + "/stat", text, 4096)) return 0;
  return sys::parse_uint64(sys::stat_field(text, 22)).value_or(0);
}

// The ranks a launcher started on this node, each a `stallscope run --out
// DIR`, must claim one directory (rank 0 reports them all). With a job id
// the key is the job's; without one (plain mpiexec, a torch env:// launch by
// hand) the ranks share their parent, the launcher: its pid and start time
// (never reused within a boot), so a later job with the same --out still
// gets a directory of its own. "" where this is not such a rank.
std::string launcher_key(const sys::EnvLookup& env, const sys::ProcessFacts& facts) {
  // run_key without a boot, pid or start time is ":0:0" unless it comes
  // from STALLSCOPE_RUN_KEY (inherited) or the job's id: those stand.
  if (sys::run_key(env, "", 0, 0) != ":0:0") return "";
  const LauncherRank lr = launcher_rank();
  if (!lr.under_launcher || facts.parent_pid <= 1) return "";
  const uint64_t ticks = start_ticks_of(facts.parent_pid);
  if (ticks == 0) return "";
  return "launcher:" + facts.boot_id + ":" + std::to_string(facts.parent_pid) + ":" +
         std::to_string(ticks) + ":world" + std::to_string(lr.world);
}

std::string claim_dir(const RunOptions& o, std::string* key_out, std::string* error) {
  const sys::ProcessFacts facts = sys::collect_process_facts();
  sys::EnvLookup env = sys::process_env();
  sys::RunDirChoice choice = sys::choose_run_dir(env, facts.host, facts.pid);
  if (!o.out.empty()) {
    choice.path = o.out;
    choice.id = sys::sanitize_path_component(fs::path(o.out).filename().string());
    choice.source = "--out";
    choice.explicit_out = true;
  }
  *key_out = sys::run_key(env, facts.boot_id, facts.start_time_ticks, facts.pid);
  if (choice.explicit_out) {
    if (std::string k = launcher_key(env, facts); !k.empty()) *key_out = std::move(k);
  }
  // Absolute (claim_run_dir makes it so): the command may change directory.
  return sys::claim_run_dir(choice, *key_out, error);
}

}  // namespace

std::string find_preload_lib(std::string* error) {
  if (const char* e = std::getenv("STALLSCOPE_PRELOAD_LIB"); e != nullptr && *e != '\0') {
    if (::access(e, R_OK) != 0) {
      *error = std::string("STALLSCOPE_PRELOAD_LIB='") + e + "' is not a readable file";
      return "";
    }
    if (const std::string why = preload_lib_problem(e); !why.empty()) {
      *error = std::string("STALLSCOPE_PRELOAD_LIB='") + e + "' is " + why +
               "; unset it to use the shim installed with stallscope";
      return "";
    }
    return fs::absolute(e).string();
  }
  const fs::path lib = (self_dir() / "../lib/libstallscope_preload.so").lexically_normal();
  if (::access(lib.c_str(), R_OK) == 0) {
    if (const std::string why = preload_lib_problem(lib); !why.empty()) {
      *error = "the preload library " + lib.string() + " is " + why +
               " (rebuild the stallscope_preload target, or set STALLSCOPE_PRELOAD_LIB)";
      return "";
    }
    return lib.string();
  }
  *error = "the preload library is missing: " + lib.string() +
           " (build the stallscope_preload target, or set STALLSCOPE_PRELOAD_LIB)";
  return "";
}

std::string find_python_dir() {
  std::vector<fs::path> dirs;
  if (const char* e = std::getenv("STALLSCOPE_PYTHON_DIR"); e != nullptr && *e != '\0')
    dirs.emplace_back(e);
  dirs.push_back(self_dir() / "../share/stallscope/python");
#ifdef STALLSCOPE_SOURCE_PYTHON_DIR
  dirs.emplace_back(STALLSCOPE_SOURCE_PYTHON_DIR);  // a build tree
#endif
  for (const auto& d : dirs)
    if (::access((d / "hooks/sitecustomize.py").c_str(), R_OK) == 0)
      return d.lexically_normal().string();
  return "";
}

bool is_python_command(const std::string& argv0) {
  return fs::path(argv0).filename().string().rfind("python", 0) == 0;
}

bool build_child_env(const RunOptions& o, const std::string& preload, ChildEnv* out,
                     std::string* error) {
  std::string key;
  out->run_dir = claim_dir(o, &key, error);
  if (out->run_dir.empty()) return false;
  auto env = current_env();
  append_list(env, "LD_PRELOAD", preload, ':', false);
  env["STALLSCOPE_OUT"] = out->run_dir;
  env["STALLSCOPE_RUN_KEY"] = key;
  env["STALLSCOPE_PROGRESS"] = "on";
  // --start-after: nothing is captured until the window opens.
  if (o.start_after_s > 0) env["STALLSCOPE_CAPTURE"] = "off";
  // --set replaces a STALLSCOPE_SET of the environment; without --set an
  // inherited one passes on (its readers check it again).
  if (!o.sets.empty()) {
    std::string set;
    for (const auto& s : o.settings) set += (set.empty() ? "" : ";") + s;
    if (set.empty())
      env.erase("STALLSCOPE_SET");
    else
      env["STALLSCOPE_SET"] = set;
  }
  // --headspace: read by the DataLoader hook (_headspace.py); never
  // inherited, since replayed batches must not train past the window.
  if (o.headspace.empty())
    env.erase("STALLSCOPE_HEADSPACE");
  else
    env["STALLSCOPE_HEADSPACE"] = o.headspace;
  // `python train.py`, or `./train.py` starting with #!/usr/bin/env python3.
  out->python_hooks =
      !o.no_python_hooks &&
      (is_python_command(o.command.front()) ||
       is_python_command(script_interpreter_of(resolve_command(o.command.front()))));
  if (out->python_hooks) {
    const std::string py = find_python_dir();
    if (py.empty()) {
      *error =
          "the Python hooks are missing (hooks/sitecustomize.py under "
          "<prefix>/share/stallscope/python or STALLSCOPE_PYTHON_DIR); "
          "use --no-python-hooks to run without them";
      return false;
    }
    append_list(env, "PYTHONPATH", py, ':', true);
    append_list(env, "PYTHONPATH", py + "/hooks", ':', true);
    env["STALLSCOPE_PYTHON_HOOKS"] = "on";
    env["STALLSCOPE_LIB"] = env.count("STALLSCOPE_LIB") ? env["STALLSCOPE_LIB"] : preload;
  }
  out->vars.clear();
  for (const auto& [k, v] : env) out->vars.push_back(k + "=" + v);
  return true;
}

LauncherRank launcher_rank() {
  const sys::RankInfo r = sys::resolve_rank(sys::process_env(), "stallscope");
  LauncherRank out;
  out.rank = r.rank < 0 ? 0 : r.rank;
  out.world = r.world_size;
  out.under_launcher = r.rank_source != "default" || r.world_source != "default";
  return out;
}

}  // namespace stallscope::cli::run
