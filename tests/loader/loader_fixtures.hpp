// Test helpers for the loader: datasets with known content, a loop that
// runs one epoch and checks every delivered sample against its hash, and a
// runner for loader_probe (a child process, for seccomp, setpriv, tracing).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "libtrace/probe_runner.hpp"
#include "stallscope/loader/loader.hpp"

namespace stallscope::loader {
inline std::ostream& operator<<(std::ostream& o, Backend b) { return o << backend_name(b); }
inline std::ostream& operator<<(std::ostream& o, ErrorPolicy p) {
  return o << (p == ErrorPolicy::kFail ? "fail" : "skip");
}
inline std::ostream& operator<<(std::ostream& o, Toggle t) {
  return o << (t == Toggle::kOn ? "on" : t == Toggle::kOff ? "off" : "auto");
}
}  // namespace stallscope::loader

namespace stallscope::test {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

inline std::vector<char> content(uint64_t key, size_t size) {
  std::vector<char> v(size);
  for (size_t j = 0; j < size; j += 8) {
    const uint64_t x = mix64(key * 1315423911u + j);
    std::memcpy(v.data() + j, &x, std::min<size_t>(8, size - j));
  }
  return v;
}

// Writes a file of `size` known bytes; returns their hash.
inline uint64_t write_file(const std::string& path, size_t size, uint64_t key) {
  const auto v = content(key, size);
  std::ofstream(path, std::ios::binary).write(v.data(), static_cast<std::streamsize>(size));
  return fnv1a(v.data(), v.size());
}

// A directory of sample files with the given sizes; hashes by dataset index
// (files are named so that sorting keeps the order of `sizes`).
struct FileSet {
  TempDir dir;
  std::vector<uint64_t> hashes;
  explicit FileSet(const std::vector<size_t>& sizes, const std::string& base = "/tmp") {
    if (base != "/tmp") {
      std::filesystem::remove_all(dir.path());
      char tmpl[256];
      std::snprintf(tmpl, sizeof tmpl, "%s/stallscope-test-XXXXXX", base.c_str());
      relocated = ::mkdtemp(tmpl);
    }
    ::chmod(root().c_str(), 0755);
    for (size_t i = 0; i < sizes.size(); ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "/s%06zu.bin", i);
      hashes.push_back(write_file(root() + name, sizes[i], i + 1));
    }
  }
  ~FileSet() {
    if (!relocated.empty()) std::filesystem::remove_all(relocated);
  }
  std::string root() const { return relocated.empty() ? dir.path() : relocated; }
  std::string relocated;
};

struct EpochResult {
  int rc = 0;  // 0 (end of epoch reached) or the error
  std::string error;
  std::map<uint64_t, uint64_t> hash_of;  // sample index -> hash of delivered bytes
  std::vector<uint64_t> order;           // sample indices as delivered
  size_t batches = 0, duplicates = 0, skipped = 0;
  uint64_t collated_bytes = 0;
  stallscope::loader::LoaderStats stats;
};

inline EpochResult run_epoch(stallscope::loader::Loader& l, uint64_t epoch = 0) {
  EpochResult r;
  l.start_epoch(epoch);
  stallscope::loader::Batch b;
  int rc;
  while ((rc = l.next_batch(&b)) == 0) {
    ++r.batches;
    r.skipped += b.skipped;
    r.collated_bytes += b.host.size();
    for (const auto& s : b.samples) {
      if (r.hash_of.count(s.index)) ++r.duplicates;
      r.hash_of[s.index] = fnv1a(s.bytes.data(), s.bytes.size());
      r.order.push_back(s.index);
    }
  }
  r.rc = rc == stallscope::loader::kEndOfEpoch ? 0 : rc;
  r.error = l.error();
  r.stats = l.stats();
  return r;
}

// A quiet test config: no probe, no device unless asked, small batches.
inline stallscope::loader::Config test_config() {
  stallscope::loader::Config c;
  c.probe = false;
  c.device = stallscope::loader::DeviceKind::kNone;
  c.batch_size = 4;
  c.workers = 2;
  c.prefetch_batches = 3;
  c.queue_depth = 8;
  c.read_size = 16384;
  c.pread_threads = 4;
  c.seed = 11;
  return c;
}

inline std::string loader_probe_path() {
  return std::string(STALLSCOPE_TEST_BINARY_DIR) + "/tests/loader/loader_probe";
}

// Runs `argv` (argv[0] searched in PATH) with extra environment, capturing
// stdout and stderr; SIGKILL after timeout_s.
inline ProbeResult run_cmd(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env = {}, int timeout_s = 60) {
  TempDir io;
  const std::string out = io / "out", err = io / "err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::setenv("STALLSCOPE_QUIET", "off", 1);  // children's notes are what tests check
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    ::_exit(127);
  }
  ProbeResult r;
  int status = 0;
  for (int i = 0; i < timeout_s * 100; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    ::usleep(10000);
    if (i + 1 == timeout_s * 100) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  auto slurp = [](const std::string& f) {
    std::ifstream in(f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace stallscope::test
