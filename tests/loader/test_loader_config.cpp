// Unit: configuration parsing and validation, dataset listing, shuffles.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "loader_fixtures.hpp"

using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {
std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* n) {
  auto it = g_env.find(n);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(loader_config)

BOOST_AUTO_TEST_CASE(variables_and_flags_set_every_knob) {
  g_env = {{"STALLSCOPE_LOADER_WORKERS", "6"}, {"STALLSCOPE_LOADER_READ_SIZE", "256K"},
           {"STALLSCOPE_LOADER_DIRECT", "off"}, {"STALLSCOPE_LOADER_ERROR_POLICY", "skip"},
           {"STALLSCOPE_LOADER_BACKEND", "pread"}, {"STALLSCOPE_LOADER_PROBE", "0"}};
  sl::Config c;
  std::string err;
  BOOST_REQUIRE(sl::apply_env(c, fake_getenv, &err) == 0);
  BOOST_TEST(c.workers == 6u);
  BOOST_TEST(c.read_size == 256u * 1024);
  BOOST_TEST((c.direct == sl::Toggle::kOff && c.on_error == sl::ErrorPolicy::kSkip));
  BOOST_TEST((c.backend == sl::Backend::kPread && !c.probe));
  std::vector<std::string> rest;
  BOOST_TEST(c.huge_pages);  // the default
  BOOST_REQUIRE(sl::apply_flags(c, {"--loader-queue-depth=64", "--lr=3", "--loader-pinned=off",
                                    "--loader-huge-pages=off"},
                                &err, &rest) == 0);
  BOOST_TEST(c.queue_depth == 64u);
  BOOST_TEST(!c.pinned);
  BOOST_TEST(!c.huge_pages);
  g_env = {{"STALLSCOPE_LOADER_HUGE_PAGES", "on"}};
  BOOST_REQUIRE(sl::apply_env(c, fake_getenv, &err) == 0);
  BOOST_TEST(c.huge_pages);
  BOOST_TEST(rest == std::vector<std::string>{"--lr=3"}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_variable_or_flag) {
  sl::Config c;
  std::string err;
  g_env = {{"STALLSCOPE_LOADER_QUEUE_DEPTH", "deep"}};
  BOOST_TEST(sl::apply_env(c, fake_getenv, &err) == -EINVAL);
  BOOST_TEST(err == "STALLSCOPE_LOADER_QUEUE_DEPTH='deep' is not an integer in [1, 4096]");
  g_env = {{"STALLSCOPE_LOADER_READ_SIZE", "5000"}};
  BOOST_TEST(sl::apply_env(c, fake_getenv, &err) == -EINVAL);
  BOOST_TEST(err.find("STALLSCOPE_LOADER_READ_SIZE='5000'") == 0u, err);
  BOOST_TEST(sl::apply_flags(c, {"--loader-error-policy=ignore"}, &err) == -EINVAL);
  BOOST_TEST(err == "--loader-error-policy='ignore' is not fail or skip");
  BOOST_TEST(sl::apply_flags(c, {"--loader-wrokers=2"}, &err) == -EINVAL);
  c.rank = 2;
  c.world_size = 2;
  BOOST_TEST(sl::validate(c, &err) == -EINVAL);
  BOOST_TEST(err.find("STALLSCOPE_LOADER_RANK") == 0u);
}

BOOST_AUTO_TEST_CASE(shuffle_is_a_reproducible_permutation_per_epoch) {
  const auto a = sl::shuffled_indices(1000, 7, 0);
  BOOST_TEST(a == sl::shuffled_indices(1000, 7, 0));
  BOOST_TEST(a != sl::shuffled_indices(1000, 7, 1));
  BOOST_TEST(a != sl::shuffled_indices(1000, 8, 0));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 1000; ++i) BOOST_REQUIRE(sorted[i] == i);
  // Pinned values: the order must not change between versions or platforms.
  const auto small = sl::shuffled_indices(8, 1, 0);
  BOOST_TEST(small == (std::vector<uint64_t>{0, 6, 2, 5, 4, 7, 1, 3}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(shard_index_errors_name_file_and_line) {
  TempDir d;
  write_file(d / "shard-0.bin", 100, 1);
  std::ofstream(d / "index") << "stallscope-shards 1\nshard-0.bin 0 50\nshard-0.bin 60 41\n";
  sl::Dataset ds;
  std::string err;
  BOOST_TEST(sl::Dataset::from_shards(d / "index", &ds, &err) == -EINVAL);
  BOOST_TEST(err.find(d / "index" + ":3: record [60, +41) ends past the end of") == 0u, err);
  std::ofstream(d / "index") << "stallscope-shards 1\nshard-0.bin 0 50\nshard-0.bin 50 50\n";
  BOOST_REQUIRE(sl::Dataset::from_shards(d / "index", &ds, &err) == 0);
  BOOST_TEST(ds.size() == 2u);
  BOOST_TEST(ds.files().size() == 1u);
  std::ofstream(d / "bad") << "shards\n";
  BOOST_TEST(sl::Dataset::from_shards(d / "bad", &ds, &err) == -EINVAL);
  BOOST_TEST(err.find(":1: expected the header") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(file_lists_resolve_relative_paths) {
  TempDir d;
  write_file(d / "a.bin", 10, 1);
  write_file(d / "b.bin", 20, 2);
  std::ofstream(d / "list") << "b.bin\n# comment\na.bin\n";
  sl::Dataset ds;
  std::string err;
  BOOST_REQUIRE(sl::Dataset::from_file_list(d / "list", &ds, &err) == 0);
  BOOST_TEST(ds.files()[0].path == d / "b.bin");
  BOOST_TEST(ds.total_bytes() == 30u);
}

BOOST_AUTO_TEST_SUITE_END()
