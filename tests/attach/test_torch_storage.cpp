// A real PyTorch DataLoader(num_workers=2) CPU loop whose
// Dataset.__getitem__ waits in a slow read: each item is read from a slowfs
// FUSE mount that answers every read after 30 ms. The shim records the
// workers' reads, so the report must name storage. Skips (77) without the
// shim or FUSE.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "attach/attach_util.hpp"
#include "scenarios/mount.hpp"

using namespace attach;

BOOST_AUTO_TEST_SUITE(torch_storage)

BOOST_AUTO_TEST_CASE(pytorch_dataloader_slow_read_names_storage) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  std::filesystem::create_directories(t.path() + "/src");
  for (int i = 0; i < 16; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/src/item%03d.bin", i);
    std::ofstream(t.path() + name, std::ios::binary) << std::string(4096, char('0' + i % 10));
  }
  scenarios::SlowMount mnt(ATTACH_SLOWFS, t.path() + "/src", t.path(), {"--latency-us", "30000"});
  BOOST_TEST_REQUIRE(mnt.ok(), mnt.why());
  const int code =
      run({STALLSCOPE_BIN, "run", "--out", run_dir, "--", "/usr/bin/python3",
           std::string(ATTACH_SOURCE_DIR) + "/torch_trainer.py", "storage", mnt.path(), "30"},
          log, 80);
  BOOST_TEST_REQUIRE(code == 0, slurp(log));
  const auto rep = report_json(run_dir);
  BOOST_TEST_REQUIRE(rep.is_object(), slurp(log));
  const auto& r = rep["ranks"][0];
  const double storage = r["parts"]["data.storage"]["share"].get<double>();
  const double pre = r["parts"]["data.preprocess"]["share"].get<double>();
  BOOST_TEST(storage >= 0.4, slurp(run_dir + "/report.txt"));
  BOOST_TEST(storage > pre);
  BOOST_TEST(r["cause"].get<std::string>().find("storage") != std::string::npos,
             r["cause"].get<std::string>());
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (!have_shim()) {
    std::puts("SKIP: the preload shim (stallscope_preload) is not built: reads are not recorded");
    return 77;
  }
  if (::access("/dev/fuse", R_OK | W_OK) != 0 || std::string(ATTACH_SLOWFS).empty()) {
    std::puts("SKIP: FUSE or slowfs is not available here");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
