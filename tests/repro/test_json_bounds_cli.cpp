// Regression (RELIABILITY.md case 32), black-box: metadata nested 60,000 deep
// crashed every reader command with SIGSEGV and took down the report of every
// rank in its directory; a 64 MiB metadata chunk cost 1-2 GiB. Now each
// command names the file, skips what is wrong and goes on with the rest.
#include <fstream>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "repro/hostile_json.hpp"

using namespace stallscope::testing;
using nlohmann::json;

namespace {

// Far below the 1-2 GiB the 64 MiB chunk cost, far above the ~35 MiB a
// report of three small files costs.
constexpr long kMaxRssKb = 256 * 1024;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A good rank 0 beside a rank whose metadata nests 60,000 deep and one whose
// metadata chunk is 64 MiB.
struct HostileRun {
  TempDir dir;
  std::string good = dir.file("a-good.sst"), deep = dir.file("b-deep.sst"),
              big = dir.file("c-big.sst");
  HostileRun() {
    write_trainer_trace(good, R"({"host":"node1","rank":0})");
    write_trainer_trace(deep, deep_metadata(60000, "node2", 1));
    write_trainer_trace(big, wide_metadata(kLargestChunk, "node3", 2));
  }
};

const json* rank_with_file(const json& report, const std::string& file) {
  for (const auto& r : report["ranks"])
    for (const auto& f : r["files"])
      if (f == file) return &r;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(json_bounds_cli)

BOOST_AUTO_TEST_CASE(report_of_the_run_directory_analyses_the_good_rank_in_bounded_memory) {
  HostileRun run;
  const auto r = run_cli_measured(run.dir, {"report", "--json", run.dir.path()});
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(r.max_rss_kb < kMaxRssKb, r.max_rss_kb << " KiB");
  const json rep = json::parse(r.out);
  const json* good = rank_with_file(rep, run.good);
  BOOST_TEST_REQUIRE(good != nullptr, r.out.substr(0, 2000));
  BOOST_TEST((*good)["rank"] == 0);
  BOOST_TEST((*good)["steps"]["total"] == 3);
  BOOST_TEST(has(r.out, run.deep + ": metadata chunk at offset 144 nests deeper than 64 levels"),
             r.out.substr(0, 4000));
  BOOST_TEST(has(r.out, run.big + ": metadata chunk at offset 144 is 67108864 bytes"));
}

BOOST_AUTO_TEST_CASE(info_of_a_64_mib_metadata_chunk_stays_in_bounded_memory) {
  HostileRun run;
  const auto r = run_cli_measured(run.dir, {"info", run.big});
  BOOST_TEST(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(r.max_rss_kb < kMaxRssKb, r.max_rss_kb << " KiB");
  BOOST_TEST(has(r.out, run.big + ": metadata chunk at offset 144 is 67108864 bytes"), r.out);
}

BOOST_AUTO_TEST_CASE(info_of_the_run_directory_names_both_files) {
  HostileRun run;
  const auto r = run_cli_measured(run.dir, {"info", run.dir.path()});
  BOOST_TEST(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(r.max_rss_kb < kMaxRssKb, r.max_rss_kb << " KiB");
  BOOST_TEST(has(r.out, run.deep + ": metadata chunk at offset 144 nests deeper than 64 levels"),
             r.out);
  BOOST_TEST(has(r.out, run.big + ": metadata chunk at offset 144 is 67108864 bytes"), r.out);
  BOOST_TEST(has(r.out, run.good), r.out);
}

BOOST_AUTO_TEST_CASE(export_and_diff_survive_deep_metadata_and_name_the_file) {
  HostileRun run;
  const auto e =
      run_cli_measured(run.dir, {"export", "--chrome", run.dir.file("out.json"), run.deep});
  BOOST_TEST(e.exit_code == 0, "exit " << e.exit_code << ": " << e.err);
  BOOST_TEST(has(e.err, run.deep + ": metadata chunk at offset 144 nests deeper than 64 levels"),
             e.err);
  BOOST_TEST(json::parse(slurp(run.dir.file("out.json")))["traceEvents"].size() > 0u);
  const auto d = run_cli_measured(run.dir, {"diff", "--json", run.good, run.deep});
  BOOST_TEST(d.exit_code == 0, "exit " << d.exit_code << ": " << d.err);
  BOOST_TEST(json::accept(d.out), d.out);
}

BOOST_AUTO_TEST_CASE(topo_trace_survives_deep_metadata) {
#ifdef STALLSCOPE_HAVE_TOPO
  HostileRun run;
  const auto r = run_cli_measured(run.dir, {"topo", "--trace", run.deep});
  BOOST_TEST(r.exit_code < 128, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(has(r.err, "no topology recorded"), r.err);
#else
  BOOST_TEST_MESSAGE("built without hwloc: no `stallscope topo`");
#endif
}

BOOST_AUTO_TEST_CASE(deep_json_attachments_are_named_and_ignored) {
  TempDir dir;
  const std::string path = dir.file("attach.sst");
  const std::string deep_numa = R"({"devices":[],"numa":[)" + nested_objects(60000) + "]}";
  TraceBuilder b;
  b.metadata(R"({"host":"node1","rank":0})");
  b.attachment("topology", deep_numa);
  b.attachment("cuda.device", nested_objects(60000));
  b.attachment("loader", nested_objects(60000));
  b.strings({{1, "trainer"}}).tracks({thread_track(1, 100, 1)});
  b.events({{1, Records().core(stallscope::format::Kind::kStep, 0, 1000, 900)}});
  b.end();
  b.write(path);
  const auto r = run_cli_measured(dir, {"report", path});
  BOOST_TEST(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(has(r.out, path + ": attachment \"topology\""), r.out);
  BOOST_TEST(has(r.out, path + ": attachment \"cuda.device\""), r.out);
  BOOST_TEST(has(r.out, path + ": attachment \"loader\""), r.out);
#ifdef STALLSCOPE_HAVE_TOPO
  const auto t = run_cli_measured(dir, {"topo", "--trace", path});
  BOOST_TEST(t.exit_code < 128, "exit " << t.exit_code << ": " << t.err);
  BOOST_TEST(has(t.err, path + " (attachment topology)"), t.err);
  BOOST_TEST(has(t.err, "deeper than 64 levels"), t.err);
#endif
}

BOOST_AUTO_TEST_CASE(diff_refuses_a_deeply_nested_report_and_names_it) {
  TempDir dir;
  const std::string report = dir.file("deep-report.json");
  std::ofstream(report) << R"({"schema":"stallscope.report","ranks":[)" << nested_objects(60000)
                        << "]}";
  write_trainer_trace(dir.file("a.sst"), R"({"host":"node1","rank":0})");
  const auto r = run_cli_measured(dir, {"diff", report, dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 1, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(has(r.err, report + ": not a stallscope report: the document nests deeper than 64"),
             r.err);
}

// Not a failure before the fix (simdjson On-Demand walks iteratively and
// builds nothing for what it skips): a guard against a recursive walk.
BOOST_AUTO_TEST_CASE(pytorch_trace_nested_60000_deep_is_imported) {
  TempDir dir;
  const std::string path = dir.file("deep.pt.trace.json");
  std::ofstream(path) << R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,)"
                      << R"("ts":1,"dur":2,"args":)" << nested_objects(60000) << R"(}],"x":)"
                      << std::string(60000, '[') << std::string(60000, ']') << "}";
  const auto r = run_cli_measured(dir, {"report", "--json", path});
  BOOST_TEST_REQUIRE(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(has(r.out, "PyTorch profiler trace (Kineto): 1 events"), r.out.substr(0, 2000));
}

BOOST_AUTO_TEST_SUITE_END()
