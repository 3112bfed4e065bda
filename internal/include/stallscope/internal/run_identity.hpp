// Run identity: which run directory a process writes into, its rank and
// world size, and the name of its trace file (DESIGN.md "Run identity").
//
//   auto env = sys::process_env();
//   sys::RankInfo rank = sys::resolve_rank(env, facts.comm, facts.cmdline);
//   sys::RunDirChoice choice = sys::choose_run_dir(env, facts.host, facts.pid);
//   std::string err;
//   std::string key = sys::run_key(env, facts.boot_id, facts.start_time_ticks, facts.pid);
//   std::string dir = sys::claim_run_dir(choice, key, &err);
//   // then export STALLSCOPE_OUT=dir and STALLSCOPE_RUN_KEY=<key> to children
//   std::string base = sys::trace_file_base(facts.host, rank, facts.pid);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::sys {

// Environment lookup seam: returns nullptr when unset. Tests pass fakes.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();

struct RankInfo {
  int rank = 0;             // 0 when nothing says otherwise; -1 for a launcher
  std::string rank_source;  // variable it came from, "default", or "launcher"
  int world_size = 1;
  std::string world_source;  // variable it came from, or "default"
  bool launcher = false;     // mpirun, torchrun's agent, srun …: not a rank
};

// True for a job launcher rather than a rank: comm mpirun, mpiexec,
// mpiexec.hydra, hydra_pmi_proxy, orterun, prterun, prted, orted, srun,
// torchrun; or a python whose cmdline runs `-m torch.distributed.run`,
// `-m torch.distributed.launch` or a script named torchrun.
bool is_launcher(std::string_view comm, const std::vector<std::string>& cmdline);

// Rank: STALLSCOPE_RANK, RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
// SLURM_PROCID; world size likewise from STALLSCOPE_WORLD_SIZE, WORLD_SIZE,
// OMPI_COMM_WORLD_SIZE, PMIX_SIZE, PMI_SIZE, SLURM_NTASKS. Values that are
// not plain decimal integers in range (rank >= 0, world size >= 1, both
// < 2^31) are skipped and the next source used. `comm` (/proc/self/comm) and
// `cmdline` spot launchers, which get rank -1 and rank_source "launcher".
RankInfo resolve_rank(const EnvLookup& env, std::string_view comm,
                      const std::vector<std::string>& cmdline = {});

struct RunDirChoice {
  std::string path;    // absolute or relative to the working directory
  std::string id;      // the run id the path was derived from (sanitized)
  std::string source;  // "STALLSCOPE_OUT", "SLURM", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "pid"
  bool explicit_out = false;  // from STALLSCOPE_OUT (or inherited from a parent)
};

// Makes `s` safe as one path component: bytes other than ASCII letters,
// digits and "._-+@=," become '_', a '.' following a '.' becomes '_' (no
// ".."), a leading '.' becomes '_' (no hidden or relative names); at most
// 128 bytes. Empty input stays empty.
std::string sanitize_path_component(std::string_view s);

// Picks the run directory: STALLSCOPE_OUT, else stallscope-<id> under
// STALLSCOPE_DIR (default: the working directory) where id comes from
// SLURM_JOB_ID[.SLURM_STEP_ID], TORCHELASTIC_RUN_ID (skipped when "none"),
// PMIX_NAMESPACE, else "<host>-<pid>". Empty values, and ids that sanitize
// to nothing, are skipped. Does not touch the file system.
RunDirChoice choose_run_dir(const EnvLookup& env, std::string_view host, int pid);

// The key that claims a run directory for this run: STALLSCOPE_RUN_KEY when a
// parent exported it; else "<source>:<id>" from the job's variables (Slurm,
// torchelastic, PMIx — every rank of the job computes the same, also when
// STALLSCOPE_OUT names the directory); else "<boot_id>:<pid>:<start_ticks>",
// unique to this first process (its children inherit STALLSCOPE_RUN_KEY).
std::string run_key(const EnvLookup& env, std::string_view boot_id, uint64_t start_ticks, int pid);

// Creates the chosen directory (and parents) and claims it for this run by
// writing run.json {"id", "key"} atomically (temp file, then a no-replace
// rename or link). A directory whose run.json names another key (or is
// unreadable) is never reused: "-2", "-3" … "-100" are tried in turn, then
// it fails. Processes racing with the same key all end in the same
// directory. Returns the directory used, always absolute (a relative path is
// taken against the working directory now, "." components dropped), or ""
// with `*error` (if non-null) naming the path and the reason. Never throws.
std::string claim_run_dir(const RunDirChoice& choice, const std::string& key, std::string* error);

// "<host>-r<rank>-<pid>", or "<host>-launcher-<pid>" for a launcher; host
// passed through sanitize_path_component ("host" if that leaves nothing).
std::string trace_file_base(std::string_view host, const RankInfo& rank, int pid);

}  // namespace stallscope::sys
