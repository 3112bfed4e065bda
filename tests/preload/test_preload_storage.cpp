// The C trainer reading from slow network storage (slowfs, a FUSE
// passthrough with 30 ms per request, tests/tools/slowfs.cpp) under plain
// LD_PRELOAD: its reads are recorded on the network tier and the report
// names storage. Skipped (exit 77) where FUSE cannot be mounted.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

bool mounted(const std::string& mnt) {
  std::ifstream in("/proc/mounts");
  std::string line;
  while (std::getline(in, line)) if (line.find(" " + mnt + " ") != std::string::npos) return true;
  return false;
}

// slowfs SRC MNT in the foreground of a child; unmounted at destruction.
class SlowMount {
 public:
  SlowMount(const std::string& src, const std::string& mnt) : mnt_(mnt) {
    const std::string bin = build_dir() + "/tests/tools/slowfs";
    if (::access(bin.c_str(), X_OK) != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl(bin.c_str(), "slowfs", src.c_str(), mnt.c_str(), "--latency-us", "30000", "-f",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100 && !mounted(mnt); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ok_ = mounted(mnt);
  }
  ~SlowMount() {
    if (pid_ <= 0) return;
    run({"/bin/fusermount3", "-u", mnt_}, {}, false);
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return ok_; }

 private:
  std::string mnt_;
  pid_t pid_ = -1;
  bool ok_ = false;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_storage)

BOOST_AUTO_TEST_CASE(report_names_storage_for_slow_reads) {
  TempDir dir;
  std::filesystem::create_directories(dir / "data");
  std::filesystem::create_directories(dir / "mnt");
  const std::string data(256 << 10, 's');
  for (int i = 0; i < 4; ++i) std::ofstream(dir / "data" + "/f" + std::to_string(i)) << data;
  SlowMount mount(dir / "data", dir / "mnt");
  if (!mount.ok()) {
    std::cout << "SKIP: slowfs (FUSE) cannot be mounted here\n";
    std::exit(77);
  }
  // Each batch: 256 KiB through 30 ms requests, 1 ms of decoding, 4 ms of
  // training: the trainer waits on storage most of each step.
  const RunResult r = run({helper("preload_trainer"), dir / "mnt", "4", "20", "1", "4", "thread"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  uint64_t reads = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    if (e.name.rfind(dir / "mnt/f", 0) != 0) continue;
    ++reads;
    BOOST_TEST(e.io.tier == uint8_t(format::Tier::kNetwork));  // FUSE
  }
  BOOST_TEST(reads == uint64_t(r.value("LOADER_READS")));
  const RunResult rep = run({build_dir() + "/bin/stallscope", "report", "--json", dir / "run"}, {},
                            false);
  BOOST_TEST_REQUIRE(rep.exit_code == 0, rep.err);
  const auto j = nlohmann::json::parse(rep.out);
  const auto& parts = j["ranks"][0]["parts"];
  const double pre = parts["data.preprocess"]["share"], sto = parts["data.storage"]["share"];
  BOOST_TEST(sto >= 0.4, rep.out);
  BOOST_TEST(sto > 4 * pre);
  const std::string cause = j["ranks"][0]["cause"].get<std::string>();
  BOOST_TEST(cause.find("storage") != std::string::npos, cause << " / " << parts.dump());
}

BOOST_AUTO_TEST_SUITE_END()
