// Rank, world size, launcher detection, run id and file names. The claim of
// the run directory on disk lives in run_dir_claim.cpp.
#include "stallscope/internal/run_identity.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>

#include "stallscope/internal/proc_text.hpp"

namespace stallscope::sys {
namespace {

constexpr std::array<const char*, 6> kRankVars = {
    "STALLSCOPE_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
constexpr std::array<const char*, 6> kWorldVars = {
    "STALLSCOPE_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
    "SLURM_NTASKS"};
// comm values (15 bytes at most, the kernel's TASK_COMM_LEN) of processes that
// start ranks and are not ranks themselves, even when a rank variable leaked
// into their environment (torchrun under srun sees SLURM_PROCID).
constexpr std::array<std::string_view, 10> kLauncherComms = {
    "mpirun", "mpiexec", "mpiexec.hydra", "hydra_pmi_proxy", "orterun", "prterun",
    "prted",  "orted",   "srun",          "torchrun"};
constexpr size_t kMaxIdLength = 128;

struct Found {
  int value;
  const char* var;
};

std::optional<Found> first_valid(const EnvLookup& env, const std::array<const char*, 6>& vars,
                                 int64_t min_value) {
  for (const char* var : vars) {
    const char* raw = env(var);
    if (raw == nullptr) continue;
    const auto v = parse_int64(raw);
    if (v && *v >= min_value && *v <= 0x7fffffff) return Found{static_cast<int>(*v), var};
  }
  return std::nullopt;
}

std::string_view basename_of(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_launch_module(std::string_view m) {
  return m == "torch.distributed.run" || m == "torch.distributed.launch";
}

// python [options] (-m module | script) …: finds the module or the script
// the way the interpreter would, skipping its own options.
bool runs_torch_launcher(const std::vector<std::string>& cmdline) {
  if (cmdline.empty() || !basename_of(cmdline[0]).starts_with("python")) return false;
  for (size_t i = 1; i < cmdline.size(); ++i) {
    const std::string_view a = cmdline[i];
    if (a == "-m") return i + 1 < cmdline.size() && is_launch_module(cmdline[i + 1]);
    if (a.starts_with("-m")) return is_launch_module(a.substr(2));
    if (a == "-c" || a == "-" || a == "--") return false;
    if (a == "-X" || a == "-W") {
      ++i;  // these two take a separate argument
      continue;
    }
    if (a.starts_with("-")) continue;
    return basename_of(a) == "torchrun";
  }
  return false;
}

const char* non_empty(const EnvLookup& env, const char* var) {
  const char* v = env(var);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

struct JobId {
  std::string id;  // sanitized
  std::string source;
};

// The id a whole job shares, from the launcher's variables; nullopt if none.
std::optional<JobId> job_id(const EnvLookup& env) {
  if (const char* job = non_empty(env, "SLURM_JOB_ID")) {
    std::string id = job;
    if (const char* step = non_empty(env, "SLURM_STEP_ID")) id += std::string(".") + step;
    if (auto s = sanitize_path_component(id); !s.empty()) return JobId{s, "SLURM"};
  }
  if (const char* run = non_empty(env, "TORCHELASTIC_RUN_ID")) {
    // torchrun exports "none" when no --rdzv-id was given: not an id.
    std::string lower = run;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    auto s = sanitize_path_component(run);
    if (lower != "none" && !s.empty()) return JobId{s, "TORCHELASTIC_RUN_ID"};
  }
  if (const char* ns = non_empty(env, "PMIX_NAMESPACE")) {
    if (auto s = sanitize_path_component(ns); !s.empty()) return JobId{s, "PMIX_NAMESPACE"};
  }
  return std::nullopt;
}

std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

std::string host_component(std::string_view host) {
  std::string h = sanitize_path_component(host);
  return h.empty() ? "host" : h;
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

bool is_launcher(std::string_view comm, const std::vector<std::string>& cmdline) {
  comm = trim(comm);
  if (std::find(kLauncherComms.begin(), kLauncherComms.end(), comm) != kLauncherComms.end()) {
    return true;
  }
  return runs_torch_launcher(cmdline);
}

RankInfo resolve_rank(const EnvLookup& env, std::string_view comm,
                      const std::vector<std::string>& cmdline) {
  RankInfo r;
  r.rank_source = r.world_source = "default";
  if (const auto rank = first_valid(env, kRankVars, 0)) {
    r.rank = rank->value;
    r.rank_source = rank->var;
  }
  if (const auto world = first_valid(env, kWorldVars, 1)) {
    r.world_size = world->value;
    r.world_source = world->var;
  }
  if (is_launcher(comm, cmdline)) {
    r.launcher = true;
    r.rank = -1;
    r.rank_source = "launcher";
  }
  return r;
}

std::string sanitize_path_component(std::string_view s) {
  constexpr std::string_view kKeep = "._-+@=,";
  std::string out;
  out.reserve(std::min(s.size(), kMaxIdLength));
  for (const char c : s.substr(0, kMaxIdLength)) {
    const auto u = static_cast<unsigned char>(c);
    const bool keep = (u < 0x80 && std::isalnum(u) != 0) || kKeep.find(c) != kKeep.npos;
    char next = keep ? c : '_';
    if (next == '.' && (out.empty() || out.back() == '.')) next = '_';
    out += next;
  }
  return out;
}

RunDirChoice choose_run_dir(const EnvLookup& env, std::string_view host, int pid) {
  RunDirChoice c;
  if (const char* out = non_empty(env, "STALLSCOPE_OUT")) {
    c.path = out;
    c.id = sanitize_path_component(basename_of(out));
    if (c.id.empty()) c.id = "run";
    c.source = "STALLSCOPE_OUT";
    c.explicit_out = true;
    return c;
  }
  if (auto job = job_id(env)) {
    c.id = std::move(job->id);
    c.source = std::move(job->source);
  } else {
    c.id = host_component(host) + "-" + std::to_string(pid);
    c.source = "pid";
  }
  const char* dir = non_empty(env, "STALLSCOPE_DIR");
  c.path = join_path(dir != nullptr ? dir : ".", "stallscope-" + c.id);
  return c;
}

std::string run_key(const EnvLookup& env, std::string_view boot_id, uint64_t start_ticks, int pid) {
  if (const char* inherited = non_empty(env, "STALLSCOPE_RUN_KEY")) return inherited;
  // All ranks of a job share its id, also when STALLSCOPE_OUT names the
  // directory: they must land in one directory, not one each.
  if (auto job = job_id(env)) return job->source + ":" + job->id;
  return std::string(trim(boot_id)) + ":" + std::to_string(pid) + ":" + std::to_string(start_ticks);
}

std::string trace_file_base(std::string_view host, const RankInfo& rank, int pid) {
  const std::string h = host_component(host);
  if (rank.launcher) return h + "-launcher-" + std::to_string(pid);
  return h + "-r" + std::to_string(rank.rank) + "-" + std::to_string(pid);
}

}  // namespace stallscope::sys
