// Run identity: rank and world size precedence, launchers, the run directory
// and its claim (including processes racing for it), file names.
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "skip_visibly.hpp"
#include "stallscope/internal/run_identity.hpp"

namespace fs = std::filesystem;
using namespace stallscope::sys;

namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/stallscope-run-identity-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

RunDirChoice choice_at(const fs::path& p) {
  RunDirChoice c;
  c.path = p.string();
  c.id = "job";
  c.source = "SLURM";
  return c;
}

// Whether this process may make a private mount namespace (root, no seccomp
// refusal): needed to make a full or read-only file system for a test.
boost::test_tools::assertion_result can_mount_privately(boost::unit_test::test_unit_id) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(::unshare(CLONE_NEWNS) == 0 ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  boost::test_tools::assertion_result r(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  r.message() << "unshare(CLONE_NEWNS) refused: cannot make a full or read-only file system";
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_identity)

BOOST_AUTO_TEST_CASE(rank_and_world_follow_the_documented_precedence) {
  FakeEnv env;
  env.vars = {{"STALLSCOPE_RANK", "7"},
              {"RANK", "6"},
              {"OMPI_COMM_WORLD_RANK", "5"},
              {"PMIX_RANK", "4"},
              {"PMI_RANK", "3"},
              {"SLURM_PROCID", "2"},
              {"STALLSCOPE_WORLD_SIZE", "70"},
              {"WORLD_SIZE", "60"},
              {"OMPI_COMM_WORLD_SIZE", "50"},
              {"PMIX_SIZE", "40"},
              {"PMI_SIZE", "30"},
              {"SLURM_NTASKS", "20"}};
  const std::vector<std::pair<std::string, std::string>> order = {
      {"STALLSCOPE_RANK", "STALLSCOPE_WORLD_SIZE"},
      {"RANK", "WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMIX_RANK", "PMIX_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rank_var, world_var] : order) {
    const RankInfo r = resolve_rank(env.lookup(), "python3");
    BOOST_TEST(r.rank_source == rank_var);
    BOOST_TEST(r.rank == std::stoi(env.vars[rank_var]));
    BOOST_TEST(r.world_source == world_var);
    BOOST_TEST(r.world_size == std::stoi(env.vars[world_var]));
    BOOST_TEST(!r.launcher);
    env.vars.erase(rank_var);
    env.vars.erase(world_var);
  }
  const RankInfo none = resolve_rank(env.lookup(), "python3");
  BOOST_TEST(none.rank == 0);
  BOOST_TEST(none.rank_source == "default");
  BOOST_TEST(none.world_size == 1);
  BOOST_TEST(none.world_source == "default");
}

BOOST_AUTO_TEST_CASE(malformed_values_are_skipped_for_the_next_source) {
  FakeEnv env;
  env.vars = {{"STALLSCOPE_RANK", "abc"},
              {"RANK", "-1"},
              {"OMPI_COMM_WORLD_RANK", "99999999999"},
              {"PMIX_RANK", ""},
              {"PMI_RANK", " 3"},
              {"SLURM_PROCID", "12"},
              {"STALLSCOPE_WORLD_SIZE", "0"},
              {"WORLD_SIZE", "4x"},
              {"OMPI_COMM_WORLD_SIZE", "+8"},
              {"PMIX_SIZE", "2147483648"},
              {"PMI_SIZE", "16"}};
  const RankInfo r = resolve_rank(env.lookup(), "python3");
  BOOST_TEST(r.rank == 12);
  BOOST_TEST(r.rank_source == "SLURM_PROCID");
  BOOST_TEST(r.world_size == 16);
  BOOST_TEST(r.world_source == "PMI_SIZE");
}

BOOST_AUTO_TEST_CASE(launchers_are_not_ranks) {
  FakeEnv env;
  env.vars = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}};
  for (const char* comm : {"mpirun", "mpiexec", "mpiexec.hydra", "hydra_pmi_proxy", "orterun",
                           "prterun", "prted", "orted", "srun", "torchrun"}) {
    const RankInfo r = resolve_rank(env.lookup(), comm);
    BOOST_TEST(r.launcher, comm);
    BOOST_TEST(r.rank == -1);
    BOOST_TEST(r.rank_source == "launcher");
    BOOST_TEST(r.world_size == 8);
  }
  using Cmd = std::vector<std::string>;
  BOOST_TEST(is_launcher("python3", Cmd{"python3", "-m", "torch.distributed.run", "train.py"}));
  BOOST_TEST(
      is_launcher("python", Cmd{"/usr/bin/python3.11", "-u", "-m", "torch.distributed.launch"}));
  BOOST_TEST(is_launcher("python3", Cmd{"python3", "-mtorch.distributed.run", "t.py"}));
  BOOST_TEST(is_launcher("python3", Cmd{"python3", "-X", "dev", "/opt/bin/torchrun", "t.py"}));
  BOOST_TEST(is_launcher("torchrun\n", Cmd{"/usr/bin/python3", "/usr/local/bin/torchrun"}));
  BOOST_TEST(!is_launcher("python3", Cmd{"python3", "train.py", "-m", "torch.distributed.run"}));
  BOOST_TEST(!is_launcher("python3", Cmd{"python3", "-c", "import torchrun"}));
  BOOST_TEST(!is_launcher("python3", Cmd{"python3", "-m", "torch.distributed.elastic"}));
  BOOST_TEST(!is_launcher("bash", Cmd{"bash", "-m", "torch.distributed.run"}));
  BOOST_TEST(!is_launcher("mpirun-helper", Cmd{}));
}

BOOST_AUTO_TEST_CASE(run_dir_precedence_out_slurm_torchelastic_pmix_pid) {
  FakeEnv env;
  env.vars = {{"STALLSCOPE_OUT", "/data/my run/"},
              {"SLURM_JOB_ID", "123"},
              {"SLURM_STEP_ID", "4"},
              {"TORCHELASTIC_RUN_ID", "te-1"},
              {"PMIX_NAMESPACE", "prterun-h-9@1"},
              {"STALLSCOPE_DIR", "/scratch/"}};
  RunDirChoice c = choose_run_dir(env.lookup(), "node1", 42);
  BOOST_TEST(c.path == "/data/my run/");
  BOOST_TEST(c.source == "STALLSCOPE_OUT");
  BOOST_TEST(c.id == "my_run");
  BOOST_TEST(c.explicit_out);
  env.vars.erase("STALLSCOPE_OUT");
  c = choose_run_dir(env.lookup(), "node1", 42);
  BOOST_TEST(c.path == "/scratch/stallscope-123.4");
  BOOST_TEST(c.source == "SLURM");
  BOOST_TEST(!c.explicit_out);
  env.vars.erase("SLURM_STEP_ID");
  BOOST_TEST(choose_run_dir(env.lookup(), "node1", 42).id == "123");
  env.vars.erase("SLURM_JOB_ID");
  c = choose_run_dir(env.lookup(), "node1", 42);
  BOOST_TEST(c.id == "te-1");
  BOOST_TEST(c.source == "TORCHELASTIC_RUN_ID");
  env.vars["TORCHELASTIC_RUN_ID"] = "none";  // torchrun without --rdzv-id
  c = choose_run_dir(env.lookup(), "node1", 42);
  BOOST_TEST(c.id == "prterun-h-9@1");
  BOOST_TEST(c.source == "PMIX_NAMESPACE");
  env.vars.erase("PMIX_NAMESPACE");
  env.vars.erase("STALLSCOPE_DIR");
  c = choose_run_dir(env.lookup(), "node1", 42);
  BOOST_TEST(c.path == "./stallscope-node1-42");
  BOOST_TEST(c.source == "pid");
}

BOOST_AUTO_TEST_CASE(ids_are_sanitized_into_one_safe_path_component) {
  BOOST_TEST(sanitize_path_component("../../etc/passwd") == "_._.__etc_passwd");
  BOOST_TEST(sanitize_path_component("..") == "_.");
  BOOST_TEST(sanitize_path_component("a..b") == "a._b");
  BOOST_TEST(sanitize_path_component(".hidden") == "_hidden");
  BOOST_TEST(sanitize_path_component("job 1\n\x01\xff") == "job_1___");
  BOOST_TEST(sanitize_path_component("ok-1.2_3+x@y=z,w") == "ok-1.2_3+x@y=z,w");
  BOOST_TEST(sanitize_path_component(std::string(500, 'a')).size() == 128u);
  FakeEnv env;
  env.vars = {{"SLURM_JOB_ID", "../x"}, {"SLURM_STEP_ID", "/.."}};
  const RunDirChoice c = choose_run_dir(env.lookup(), "h", 1);
  BOOST_TEST(c.id.find('/') == std::string::npos);
  BOOST_TEST(c.id.find("..") == std::string::npos);
  BOOST_TEST(c.path == "./stallscope-" + c.id);
  env.vars = {{"TORCHELASTIC_RUN_ID", "NONE"}, {"PMIX_NAMESPACE", ""}};
  BOOST_TEST(choose_run_dir(env.lookup(), "bad/host", 9).id == "bad_host-9");
}

BOOST_AUTO_TEST_CASE(run_key_follows_the_job_then_the_first_process) {
  FakeEnv env;
  env.vars = {{"STALLSCOPE_OUT", "/o"}, {"SLURM_JOB_ID", "77"}};
  BOOST_TEST(run_key(env.lookup(), "boot", 5, 10) == "SLURM:77");
  env.vars.erase("SLURM_JOB_ID");
  BOOST_TEST(run_key(env.lookup(), "boot\n", 5, 10) == "boot:10:5");
  env.vars["STALLSCOPE_RUN_KEY"] = "inherited";
  BOOST_TEST(run_key(env.lookup(), "boot", 5, 10) == "inherited");
}

BOOST_AUTO_TEST_CASE(claim_creates_parents_and_writes_run_json) {
  TempDir tmp;
  const fs::path dir = tmp.path / "a" / "b" / "stallscope-job";
  std::string err;
  const std::string got = claim_run_dir(choice_at(dir), "key-1", &err);
  BOOST_TEST(got == dir.string(), err);
  const std::string json = read_file(dir / "run.json");
  BOOST_TEST(json == "{\"id\":\"job\",\"key\":\"key-1\"}\n");
  // The same key again (a later rank, a restart of the same job): reused.
  BOOST_TEST(claim_run_dir(choice_at(dir), "key-1", &err) == dir.string());
  // No temp files left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  BOOST_TEST(entries == 1);
}

BOOST_AUTO_TEST_CASE(a_directory_of_another_run_is_never_reused) {
  TempDir tmp;
  const fs::path dir = tmp.path / "stallscope-job";
  std::string err;
  BOOST_TEST(claim_run_dir(choice_at(dir), "first", &err) == dir.string());
  BOOST_TEST(claim_run_dir(choice_at(dir), "second", &err) == dir.string() + "-2");
  BOOST_TEST(claim_run_dir(choice_at(dir), "third", &err) == dir.string() + "-3");
  BOOST_TEST(claim_run_dir(choice_at(dir), "second", &err) == dir.string() + "-2");
  // Unparseable run.json and a file in the way are both "taken".
  fs::create_directories(tmp.path / "x");
  std::ofstream(tmp.path / "x" / "run.json") << "{not json";
  std::ofstream(tmp.path / "x-2") << "a file";
  BOOST_TEST(claim_run_dir(choice_at(tmp.path / "x"), "k", &err) == (tmp.path / "x-3").string());
  BOOST_TEST(read_file(tmp.path / "x" / "run.json") == "{not json");
}

BOOST_AUTO_TEST_CASE(claim_gives_up_after_the_bound_with_an_error) {
  TempDir tmp;
  const fs::path dir = tmp.path / "d";
  std::string err;
  for (int i = 1; i <= 100; ++i) {
    BOOST_TEST(!claim_run_dir(choice_at(dir), "k" + std::to_string(i), &err).empty());
  }
  err.clear();
  BOOST_TEST(claim_run_dir(choice_at(dir), "k101", &err).empty());
  BOOST_TEST(err.find("other runs") != std::string::npos, err);
  BOOST_TEST(claim_run_dir(choice_at(dir), "k101", nullptr).empty());  // null error: no crash
}

// STALLSCOPE_OUT=/dev/full recorded into /dev/full-2 before, a regular file
// into afile-2, and /dev/full/x said "-100 all hold other runs".
BOOST_AUTO_TEST_CASE(a_run_directory_naming_a_non_directory_is_refused) {
  TempDir tmp;
  const std::string afile = (tmp.path / "afile").string(), full = (tmp.path / "full").string();
  std::ofstream(afile) << "x";
  RunDirChoice c = choice_at(afile);
  c.source = "STALLSCOPE_OUT";
  std::string err;
  BOOST_TEST(claim_run_dir(c, "k", &err).empty());
  BOOST_TEST(err == "STALLSCOPE_OUT=" + afile + ": not a directory (" + afile +
                        " is a regular file)");
  BOOST_TEST(!fs::exists(afile + "-2"));
  // Our own node of /dev/full: the machine's is never risked.
  BOOST_TEST_REQUIRE(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0);
  c.path = full;
  BOOST_TEST(claim_run_dir(c, "k", &err).empty());
  BOOST_TEST(err.find("is a character device") != std::string::npos, err);
  BOOST_TEST(!fs::exists(full + "-2"));
  c.path = full + "/x";
  BOOST_TEST(claim_run_dir(c, "k", &err).empty());
  BOOST_TEST(err == "STALLSCOPE_OUT=" + full + "/x: not a directory (" + full +
                        " is a character device)");
  c.source = "SLURM";  // a derived directory names where it came from
  BOOST_TEST(claim_run_dir(c, "k", &err).empty());
  BOOST_TEST(err.find("run directory " + full + "/x (from SLURM)") == 0u, err);
}

BOOST_AUTO_TEST_CASE(claim_reports_an_uncreatable_directory) {
  TempDir tmp;
  std::ofstream(tmp.path / "file") << "x";
  std::string err;
  // Works as root too: a path through a regular file fails with ENOTDIR.
  const fs::path dir = tmp.path / "file" / "sub" / "stallscope-job";
  BOOST_TEST(claim_run_dir(choice_at(dir), "k", &err).empty());
  BOOST_TEST(err.find((tmp.path / "file").string()) != std::string::npos, err);
  RunDirChoice empty;
  BOOST_TEST(claim_run_dir(empty, "k", &err).empty());
}

// ENOSPC (a full 8 KiB tmpfs) and EROFS (a read-only bind mount), made in a
// private mount namespace of a child: an error naming the path, no directory.
BOOST_AUTO_TEST_CASE(claim_reports_a_full_or_read_only_file_system,
                     *stallscope::test::skip_unless(can_mount_privately)) {
  TempDir tmp;
  const fs::path full = tmp.path / "full", ro = tmp.path / "ro";
  fs::create_directories(full);
  fs::create_directories(ro);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    auto run = [&]() -> int {
      if (::unshare(CLONE_NEWNS) != 0 ||
          ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return 10;
      if (::mount("tmpfs", full.c_str(), "tmpfs", 0, "size=8k") != 0) return 11;
      std::ofstream(full / "filler") << std::string(64 * 1024, 'x');  // fills it
      if (::mount(ro.c_str(), ro.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
          ::mount(nullptr, ro.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
        return 12;
      std::string err;
      if (!claim_run_dir(choice_at(full / "stallscope-job"), "k", &err).empty()) return 20;
      if (err.find("No space left") == std::string::npos ||
          err.find(full.string()) == std::string::npos)
        return 21;
      err.clear();
      if (!claim_run_dir(choice_at(ro / "stallscope-job"), "k", &err).empty()) return 22;
      if (err.find("Read-only") == std::string::npos) return 23;
      return fs::exists(ro / "stallscope-job") ? 24 : 0;
    };
    ::_exit(run());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
}

// Many ranks of one job start together: whichever wins, all of one key end in
// one directory, and a different job racing for the same name gets another.
BOOST_AUTO_TEST_CASE(racing_processes_with_one_key_share_one_directory) {
  TempDir tmp;
  const fs::path dir = tmp.path / "shared" / "stallscope-job";
  for (int round = 0; round < 5; ++round) {
    const fs::path d = dir.string() + "-round" + std::to_string(round);
    int go[2], out[2];
    BOOST_REQUIRE(::pipe(go) == 0 && ::pipe(out) == 0);
    constexpr int kProcs = 12;
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcs; ++i) {
      const pid_t pid = ::fork();
      BOOST_REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(go[1]);
        char c;
        (void)::read(go[0], &c, 1);  // released when the parent closes the pipe
        const std::string key = i % 3 == 2 ? "other-job" : "job-key";
        std::string line = key + " " + claim_run_dir(choice_at(d), key, nullptr) + "\n";
        (void)::write(out[1], line.data(), line.size());  // < PIPE_BUF: atomic
        ::_exit(0);
      }
      pids.push_back(pid);
    }
    ::close(go[0]);
    ::close(out[1]);
    ::close(go[1]);  // start!
    for (const pid_t pid : pids) ::waitpid(pid, nullptr, 0);
    std::string all;
    char buf[4096];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
      all.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    std::map<std::string, std::set<std::string>> dirs_by_key;
    std::istringstream lines(all);
    int count = 0;
    for (std::string key, path; lines >> key >> path; ++count) dirs_by_key[key].insert(path);
    BOOST_TEST(count == kProcs);
    BOOST_TEST(dirs_by_key["job-key"].size() == 1u);
    BOOST_TEST(dirs_by_key["other-job"].size() == 1u);
    BOOST_TEST(*dirs_by_key["job-key"].begin() != *dirs_by_key["other-job"].begin());
  }
}

BOOST_AUTO_TEST_CASE(trace_file_names) {
  RankInfo r;
  r.rank = 3;
  BOOST_TEST(trace_file_base("node-1", r, 4242) == "node-1-r3-4242");
  BOOST_TEST(trace_file_base("a/b..c", r, 1) == "a_b._c-r3-1");
  BOOST_TEST(trace_file_base("", r, 1) == "host-r3-1");
  r.launcher = true;
  r.rank = -1;
  BOOST_TEST(trace_file_base("node-1", r, 7) == "node-1-launcher-7");
}

BOOST_AUTO_TEST_CASE(process_env_reads_the_real_environment) {
  ::setenv("STALLSCOPE_TEST_RANK_PROBE", "5", 1);
  const EnvLookup env = process_env();
  BOOST_TEST(std::string(env("STALLSCOPE_TEST_RANK_PROBE")) == "5");
  BOOST_TEST(env("STALLSCOPE_TEST_SURELY_UNSET_VARIABLE") == nullptr);
  ::unsetenv("STALLSCOPE_TEST_RANK_PROBE");
}

BOOST_AUTO_TEST_SUITE_END()
