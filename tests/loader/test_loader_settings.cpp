// Unit: the loader.* items of STALLSCOPE_SET (stallscope run --set), applied
// over a configuration with one outcome and one mark text per item.
#include <boost/test/unit_test.hpp>
#include <stallscope/loader/settings.hpp>

namespace sl = stallscope::loader;

BOOST_AUTO_TEST_SUITE(loader_settings)

BOOST_AUTO_TEST_CASE(applies_loader_items_in_order_and_says_what_was_there) {
  sl::Config c;
  c.workers = 1;
  std::vector<sl::SettingOutcome> out;
  const int n = sl::apply_settings(
      c,
      "dataloader.num_workers=4; loader.workers=4 ;loader.pinned=OFF;loader.read_size=256K;"
      "loader.workers=3",
      &out);
  BOOST_TEST(n == 4);
  BOOST_TEST(c.workers == 3u);  // the last item wins
  BOOST_TEST(!c.pinned);
  BOOST_TEST(c.read_size == 256u * 1024);
  BOOST_REQUIRE(out.size() == 4u);  // dataloader.* is not the loader's: skipped
  BOOST_TEST(out[0].mark() == "set applied loader.workers=4 at - (was 1)");
  BOOST_TEST(out[1].mark() == "set applied loader.pinned=false at - (was true)");
  BOOST_TEST(out[2].mark() == "set applied loader.read_size=262144 at - (was 1048576)");
  BOOST_TEST(out[3].mark() == "set applied loader.workers=3 at - (was 4)");
}

BOOST_AUTO_TEST_CASE(refuses_bad_items_and_keeps_the_programs_value) {
  sl::Config c;
  c.workers = 5;
  std::vector<sl::SettingOutcome> out;
  const int n = sl::apply_settings(
      c,
      "loader.workers=0;loader.wrokers=4;loader[0].workers=2;loader.read_size=5000;loader.pinned",
      &out);
  BOOST_TEST(n == 0);
  BOOST_TEST(c.workers == 5u);
  BOOST_TEST(c.read_size == 1u << 20);  // a refused value leaves nothing behind
  BOOST_REQUIRE(out.size() == 5u);
  for (const auto& o : out) BOOST_TEST(!o.applied);
  BOOST_TEST(out[0].mark() == "set refused loader.workers=0 at -: not an integer in [1, 256]");
  BOOST_TEST(
      out[1].mark().find("unknown field 'wrokers' (known: workers, prefetch,") != std::string::npos,
      out[1].mark());
  BOOST_TEST(out[2].reason == "the loader namespace takes no selector");
  BOOST_TEST(out[3].reason.find("a multiple of 4096") != std::string::npos, out[3].reason);
  BOOST_TEST(out[4].reason == "no '=' (expected KEY=VALUE)");
}

BOOST_AUTO_TEST_CASE(null_empty_and_foreign_sets_change_nothing) {
  sl::Config c;
  std::vector<sl::SettingOutcome> out;
  BOOST_TEST(sl::apply_settings(c, nullptr, &out) == 0);
  BOOST_TEST(sl::apply_settings(c, "", &out) == 0);
  BOOST_TEST(sl::apply_settings(c, ";;  ;dataloader[train.py:4].pin_memory=true;other=1", &out) ==
             0);
  BOOST_TEST(out.empty());
  BOOST_TEST(c.workers == sl::Config{}.workers);
}

BOOST_AUTO_TEST_CASE(check_setting_normalizes_or_names_what_is_accepted) {
  std::string norm, err;
  BOOST_TEST(sl::check_setting("prefetch", "08", &norm, &err) == 0);
  BOOST_TEST(norm == "8");
  BOOST_TEST(sl::check_setting("direct", "On", &norm, &err) == 0);
  BOOST_TEST(norm == "true");
  BOOST_TEST(sl::check_setting("backend", "PREAD", &norm, &err) == 0);
  BOOST_TEST(norm == "pread");
  BOOST_TEST(sl::check_setting("queue_depth", "9999", &norm, &err) == -EINVAL);
  BOOST_TEST(err == "bad value '9999' for loader.queue_depth (not an integer in [1, 4096])");
  BOOST_TEST(sl::check_setting("rank", "1", &norm, &err) == -ENOENT);  // set by the launcher
  BOOST_TEST(err.find("unknown field 'rank'") == 0u, err);
}

BOOST_AUTO_TEST_SUITE_END()
