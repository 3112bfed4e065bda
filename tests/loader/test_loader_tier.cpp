// Storage tier and page-cache classification, as root and as an
// unprivileged user, on the local disk and tmpfs; drop_cache() makes the
// next buffered read a miss and the one after it a hit.
#include <boost/test/unit_test.hpp>

#include "loader_fixtures.hpp"
#include "stallscope/loader/tier.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {

ProbeResult classify(const std::string& file, bool as_nobody, bool no_nowait = false) {
  std::vector<std::string> cmd;
  if (as_nobody) cmd = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  cmd.push_back(loader_probe_path());
  cmd.push_back("classify");
  cmd.push_back(file);
  if (no_nowait) cmd.push_back("nonowait");
  return run_cmd(cmd);
}

bool has(const ProbeResult& r, const std::string& line) {
  return r.out.find(line + "\n") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loader_tier)

BOOST_AUTO_TEST_CASE(magic_numbers_name_tiers) {
  BOOST_TEST(sl::tier_of_magic(0xEF53).fs == "ext4");
  BOOST_TEST(sl::tier_name(sl::tier_of_magic(0x01021994).tier) == "memory");
  BOOST_TEST(sl::tier_name(sl::tier_of_magic(0x6969).tier) == "network");
  BOOST_TEST(sl::tier_name(sl::tier_of_magic(0x65735546).tier) == "network");  // fuse.*
  BOOST_TEST(sl::tier_of_magic(0x0BD00BD0).fs == "lustre");
  BOOST_TEST(sl::tier_of_magic(0x12345).fs == "0x12345");
}

BOOST_AUTO_TEST_CASE(local_disk_and_tmpfs_as_root_and_as_nobody) {
  FileSet disk({8192});
  FileSet shm({8192}, "/dev/shm");
  for (bool nobody : {false, true}) {
    BOOST_TEST_CONTEXT("as " << (nobody ? "nobody" : "root")) {
      const auto d = classify(disk.root() + "/s000000.bin", nobody);
      BOOST_REQUIRE_EQUAL(d.exit_code, 0);
      BOOST_TEST(has(d, "tier local"), d.out);
      BOOST_TEST(has(d, "method nowait"), d.out);
      const auto m = classify(shm.root() + "/s000000.bin", nobody);
      BOOST_TEST(has(m, "tier memory"), m.out);
      BOOST_TEST(has(m, "fs tmpfs"), m.out);
      BOOST_TEST(has(m, "method tier"), m.out);
      // Where RWF_NOWAIT is refused: cachestat for the owner (root), refused
      // for a user who neither owns nor may write the file -> latency.
      const auto c = classify(disk.root() + "/s000000.bin", nobody, true);
      BOOST_TEST(has(c, nobody ? "method latency" : "method cachestat"), c.out);
    }
  }
}

BOOST_AUTO_TEST_CASE(drop_cache_makes_the_next_read_a_miss_then_a_hit) {
  FileSet files({1 << 20});
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_directory(files.root(), &ds, &err) == 0);
  sl::Config cfg = test_config();
  cfg.direct = sl::Toggle::kOff;
  cfg.read_size = 1 << 20;
  std::unique_ptr<sl::Loader> l;
  BOOST_REQUIRE(sl::Loader::create(ds, cfg, {}, &l, &err) == 0);
  BOOST_REQUIRE(sl::drop_cache(files.root()) == 0);
  const EpochResult cold = run_epoch(*l, 0);
  BOOST_TEST(cold.stats.cache_miss_bytes > (1u << 19));
  const EpochResult warm = run_epoch(*l, 1);
  BOOST_TEST(warm.stats.cache_hit_bytes - cold.stats.cache_hit_bytes == (1u << 20));
}

BOOST_AUTO_TEST_SUITE_END()
