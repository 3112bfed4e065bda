// Storage tier and page-cache method on a FUSE mount (tests/tools/slowfs
// passing a directory through), as root and as an unprivileged user:
// network tier, and never RWF_NOWAIT (FUSE refuses it). Skips visibly
// (exit 77) where FUSE cannot be used here.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "loader_fixtures.hpp"

using namespace stallscope::test;

namespace {

constexpr long kFuseMagic = 0x65735546;

// slowfs mounted over `src` (allow_other: the unprivileged user reads it
// too); unmounted at the end, also when a check fails.
class FuseMount {
 public:
  explicit FuseMount(const std::string& src) {
    ::chmod(mnt_.path().c_str(), 0755);
    const std::string cmd = std::string("'") + STALLSCOPE_SLOWFS + "' '" + src + "' '" +
                            mnt_.path() + "' -o allow_other 2>&1";
    if (std::system(cmd.c_str()) != 0) return;
    for (int i = 0; i < 100 && !mounted(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ok_ = mounted();
  }
  ~FuseMount() {
    if (!ok_) return;
    const std::string path = mnt_.path();
    if (std::system(("fusermount3 -u '" + path + "' 2>/dev/null").c_str()) != 0)
      (void)!std::system(("umount -l '" + path + "' 2>/dev/null").c_str());
  }
  bool ok() const { return ok_; }
  std::string path() const { return mnt_.path(); }

 private:
  bool mounted() const {
    struct statfs st{};
    return ::statfs(mnt_.path().c_str(), &st) == 0 && st.f_type == kFuseMagic;
  }
  TempDir mnt_;
  bool ok_ = false;
};

ProbeResult classify(const std::string& file, bool as_nobody) {
  std::vector<std::string> cmd;
  if (as_nobody) cmd = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  cmd.push_back(loader_probe_path());
  cmd.push_back("classify");
  cmd.push_back(file);
  return run_cmd(cmd);
}

bool has(const ProbeResult& r, const std::string& line) {
  return r.out.find(line + "\n") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_tier_fuse)

BOOST_AUTO_TEST_CASE(fuse_is_network_tier_without_nowait_as_root_and_as_nobody) {
  FileSet files({8192, 100000});
  FuseMount fuse(files.root());
  BOOST_REQUIRE_MESSAGE(fuse.ok(), "slowfs did not mount");
  for (bool nobody : {false, true}) {
    BOOST_TEST_CONTEXT("as " << (nobody ? "nobody" : "root")) {
      for (const char* name : {"/s000000.bin", "/s000001.bin"}) {
        const auto r = classify(fuse.path() + name, nobody);
        BOOST_REQUIRE_EQUAL(r.exit_code, 0);
        BOOST_TEST(has(r, "tier network"), r.out);
        BOOST_TEST(has(r, "fs fuse"), r.out);
        BOOST_TEST(!has(r, "method nowait"), r.out);
        BOOST_TEST((has(r, "method cachestat") || has(r, "method latency")), r.out);
        if (!nobody) BOOST_TEST(has(r, "method cachestat"), r.out);  // root may always
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    std::puts("SKIP: /dev/fuse is not available here");
    return 77;
  }
  if (::access(STALLSCOPE_SLOWFS, X_OK) != 0) {
    std::puts("SKIP: slowfs was not built (libfuse3 missing)");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
