// NVTX injection: a program using only the NVTX3 headers, with two NVTX
// copies in the process, run under plain LD_PRELOAD; push/pop, start/end,
// domains and registered strings arrive as user ranges (RELIABILITY.md 17).
#include <boost/test/unit_test.hpp>

#include <map>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

BOOST_AUTO_TEST_SUITE(preload_nvtx)

BOOST_AUTO_TEST_CASE(ranges_of_every_copy_arrive) {
  TempDir dir;
  const RunResult r = run({helper("nvtx_only")}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  std::map<std::string, int> ranges;
  std::string domain_of_registered;
  for (const Ev& e : t.of_kind(format::Kind::kRange)) {
    ++ranges[e.name];
    if (e.name == "registered") domain_of_registered = "set";
  }
  BOOST_TEST(ranges["step"] == 3);
  BOOST_TEST(ranges["inner"] == 3);
  BOOST_TEST(ranges["registered"] == 1);
  BOOST_TEST(ranges["startend"] == 1);
  BOOST_TEST(ranges["from_copy"] == 1);  // the second NVTX copy
  size_t marks = 0;
  for (const Ev& e : t.of_kind(format::Kind::kMark)) marks += e.name == "a mark";
  BOOST_TEST(marks == 1u);
}

BOOST_AUTO_TEST_CASE(domain_is_recorded_with_the_range) {
  TempDir dir;
  const RunResult r = run({helper("nvtx_only")}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  std::string error;
  const auto files = reader::list_trace_files(dir / "run", &error);
  BOOST_TEST_REQUIRE(files.size() == 1u);
  reader::TraceReader rd(files[0]);
  reader::Event e;
  bool found = false;
  while (rd.next(e)) {
    if (e.kind != uint8_t(format::Kind::kRange) || rd.string(e.name_id) != "registered") continue;
    found = true;
    BOOST_TEST(e.has(format::Ext::kRange));
    BOOST_TEST(rd.string(e.range.h.aux) == "mydomain");
  }
  BOOST_TEST(found);
}

BOOST_AUTO_TEST_CASE(an_existing_injection_is_kept_and_reported) {
  TempDir dir;
  const RunResult r = run({helper("nvtx_only")}, {{"STALLSCOPE_OUT", dir / "run"},
                                                  {"NVTX_INJECTION64_PATH", "/nonexistent/libother.so"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("NVTX_INJECTION64_PATH is already set") != std::string::npos, r.err);
  BOOST_TEST(load_run(dir / "run").of_kind(format::Kind::kRange).empty());
}

BOOST_AUTO_TEST_CASE(runs_unchanged_without_the_shim) {
  const RunResult r = run({helper("nvtx_only")}, {}, false);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("NVTX done") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
