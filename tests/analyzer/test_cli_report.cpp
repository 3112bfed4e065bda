// Black-box: `stallscope report` and `stallscope diff` on run directories
// recorded by analyzer_probe through the real recorder (a storage-bound run
// and a compute-bound run, 30 steps of 10 ms each): verdicts, JSON against
// docs/report-schema.json, the HTML file, flag and input errors, the diff.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

// cli_run.hpp first: schema_check.hpp brings `json` into stallscope::testing.
#include "cli/cli_run.hpp"
#include "analyzer/schema_check.hpp"

using namespace stallscope::testing;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Records `mode` with analyzer_probe into dir/<mode>; returns that directory.
std::string record(const TempDir& dir, const std::string& mode) {
  const std::string out = dir.file(mode);
  const std::string cmd = "STALLSCOPE_OUT=" + shell_quote(out) + " " + shell_quote(STALLSCOPE_ANALYZER_PROBE) +
                          " " + mode + " 30 >/dev/null";
  BOOST_REQUIRE_EQUAL(std::system(cmd.c_str()), 0);
  return out;
}

// Both runs, recorded once for the whole module (each takes ~0.3 s).
struct Runs {
  TempDir dir;
  std::string data = record(dir, "data"), compute = record(dir, "compute");
  static const Runs& get() {
    static const Runs runs;
    return runs;
  }
};

json load_schema() {
  std::ifstream f(STALLSCOPE_REPORT_SCHEMA);
  BOOST_REQUIRE(f.good());
  return json::parse(f);
}

double part_ms(const json& rank, const std::string& part, const std::string& key) {
  return rank.at("parts").at(part).at(key).get<double>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_report)

// --expect: the storage-bound run fails 'data_stall<5%' (named, with the
// measured share, exit 3) and meets 'data.storage>=40%'; the compute-bound
// one meets 'data_stall<5%'; a malformed expectation is a usage error.
BOOST_AUTO_TEST_CASE(expect_is_a_regression_gate_naming_what_failed) {
  const auto& runs = Runs::get();
  auto r = run_cli(runs.dir, {"report", "--expect", "data_stall<5%", "--expect",
                              "data.storage>=40%", runs.data});
  BOOST_TEST(r.exit_code == 3, r.err);
  BOOST_TEST(has(r.err, "expectation failed: data_stall<5% — rank 0: data_stall "), r.err);
  BOOST_TEST(has(r.err, "(expected < 5 %)"), r.err);
  BOOST_TEST(has(r.err, "expectation met: data.storage>=40%"), r.err);
  BOOST_TEST(has(r.out, "input-bound: storage"), "the report is printed all the same");
  r = run_cli(runs.dir, {"report", "--expect", "data_stall<5%", "--expect", "top_gain<5%",
                         runs.compute});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.err, "expectation met: top_gain<5%"), r.err);
  for (const auto& [bad, why] : {std::pair{"data_stall<5", "the value needs a unit"},
                                 std::pair{"data_stall=5%", "not METRIC OP VALUE"},
                                 std::pair{"step<5%", "a step is given in ms"},
                                 std::pair{"data_stall<150%", "at most 100 %"},
                                 std::pair{"data_stall<fast%", "'fast' is not a number"}}) {
    r = run_cli(runs.dir, {"report", "--expect", bad, runs.data});
    BOOST_TEST(r.exit_code == 2, bad);
    BOOST_TEST(has(r.err, std::string("--expect '") + bad + "': " ), r.err);
    BOOST_TEST(has(r.err, why), r.err);
  }
}

BOOST_AUTO_TEST_CASE(text_report_names_the_verdict_and_the_parts) {
  const auto& runs = Runs::get();
  auto r = run_cli(runs.dir, {"report", runs.data});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.out, "input-bound: storage 50 % of step time"), r.out);
  BOOST_TEST(has(r.out, "bottleneck: storage"), r.out);
  BOOST_TEST(has(r.out, "steps: 30 from step_events"), r.out);
  BOOST_TEST(!has(r.out, "\x1b["), "no color when stdout is not a terminal");
  r = run_cli(runs.dir, {"report", runs.compute});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.out, "compute-bound (healthy)"), r.out);
  r = run_cli(runs.dir, {"report", "--color", runs.compute});
  BOOST_TEST(has(r.out, "\x1b["), "--color colors even into a file");
}

BOOST_AUTO_TEST_CASE(json_report_parses_validates_and_holds_the_attribution) {
  const auto& runs = Runs::get();
  const auto r = run_cli(runs.dir, {"report", "--json", runs.data});
  BOOST_TEST(r.exit_code == 0, r.err);
  const json doc = json::parse(r.out);
  const auto errs = validate(load_schema(), doc);
  for (const auto& e : errs) BOOST_TEST_MESSAGE(e);
  BOOST_TEST(errs.empty());
  BOOST_REQUIRE_EQUAL(doc["ranks"].size(), 1u);
  const json& rank = doc["ranks"][0];
  BOOST_TEST(rank["bottleneck"] == "storage");
  BOOST_TEST(rank["steps"]["total"].get<int>() == 30, rank["steps"].dump());
  BOOST_TEST(rank["steps"]["steady"].get<int>() == 29, rank["steps"].dump());
  // 5 ms read + 1 ms decode of each 10 ms step, then 4 ms of kernels.
  BOOST_TEST(part_ms(rank, "data.storage", "p50_ms") == 5.0, boost::test_tools::tolerance(0.01));
  BOOST_TEST(part_ms(rank, "data.preprocess", "p50_ms") == 1.0, boost::test_tools::tolerance(0.01));
  BOOST_TEST(part_ms(rank, "compute", "p50_ms") == 4.0, boost::test_tools::tolerance(0.01));
  BOOST_TEST(part_ms(rank, "data.storage", "share") == 0.5, boost::test_tools::tolerance(0.01));
}

BOOST_AUTO_TEST_CASE(html_report_is_one_self_contained_file_with_a_chart) {
  const auto& runs = Runs::get();
  const std::string html = runs.dir.file("report.html");
  const auto r = run_cli(runs.dir, {"report", "--html", html, runs.data});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.out, "input-bound"), "text still printed with --html");
  BOOST_TEST(!std::filesystem::exists(html + ".tmp"));
  const std::string page = slurp(html);
  BOOST_TEST((page.starts_with("<!DOCTYPE html>") || page.starts_with("<!doctype html>")), page.substr(0, 40));
  BOOST_TEST(has(page, "<svg"));
  BOOST_TEST(has(page, "</html>"));
  BOOST_TEST(!has(page, "http://"), "nothing to fetch");
  BOOST_TEST(!has(page, "https://"), "nothing to fetch");
  BOOST_TEST(!has(page, "<script src"));
  BOOST_TEST(!has(page, "<link"));
  const auto bad = run_cli(runs.dir, {"report", "--html", runs.dir.file("no/such/dir/r.html"), runs.data});
  BOOST_TEST(bad.exit_code == 1);
  BOOST_TEST(has(bad.err, "--html: cannot write " + runs.dir.file("no/such/dir/r.html")), bad.err);
}

BOOST_AUTO_TEST_CASE(bad_flags_exit_2_naming_the_flag) {
  const auto& runs = Runs::get();
  struct Case {
    std::vector<std::string> args;
    std::string text;
  };
  const Case cases[] = {
      {{"report", "--bogus", runs.data}, "--bogus"},
      {{"report", "--step-pattern", "(unclosed", runs.data}, "(unclosed"},
      {{"report"}, "PATH is required"},
      {{"report", "--lag", "0", runs.data}, "--lag"},
      {{"report", "--lag", "soon", runs.data}, "--lag"},
      {{"diff", "--tolerance", "7", runs.data, runs.compute}, "--tolerance"},
      {{"diff", "--frobnicate", runs.data, runs.compute}, "--frobnicate"},
      {{"diff", runs.data}, "RUN_B is missing"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(runs.dir, c.args);
    BOOST_TEST(r.exit_code == 2, c.text + ": " + r.err);
    BOOST_TEST(has(r.err, c.text), r.err);
  }
}

BOOST_AUTO_TEST_CASE(missing_path_exits_1_naming_it) {
  const auto& runs = Runs::get();
  const std::string absent = runs.dir.file("absent-run");
  auto r = run_cli(runs.dir, {"report", absent});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, absent + ": no such file or directory"), r.err);
  r = run_cli(runs.dir, {"diff", runs.data, absent});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, absent + ": no such file or directory"), r.err);
}

BOOST_AUTO_TEST_CASE(diff_of_data_bound_vs_compute_bound_reports_the_deltas) {
  const auto& runs = Runs::get();
  auto r = run_cli(runs.dir, {"diff", "--json", runs.data, runs.compute});
  BOOST_TEST(r.exit_code == 0, r.err);
  const json doc = json::parse(r.out);
  BOOST_TEST(doc["schema"] == "stallscope.diff");
  BOOST_REQUIRE_EQUAL(doc["ranks"].size(), 1u);
  const json& rank = doc["ranks"][0];
  const auto tol = boost::test_tools::tolerance(0.02);
  BOOST_TEST(rank["a_step_ms"].get<double>() == 10.0, tol);
  BOOST_TEST(rank["b_step_ms"].get<double>() == 10.0, tol);
  BOOST_TEST(part_ms(rank, "data.storage", "delta_ms") == -5.0, tol);
  BOOST_TEST(part_ms(rank, "data.preprocess", "delta_ms") == -1.0, tol);
  BOOST_TEST(part_ms(rank, "compute", "delta_ms") == 5.8, tol);
  BOOST_TEST(part_ms(rank, "compute", "a_ms") == 4.0, tol);
  BOOST_TEST(!rank["remedies"].empty(), "run A's remedies are checked against run B");
  // The text form, and a saved JSON report as run A.
  r = run_cli(runs.dir, {"diff", runs.data, runs.compute});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.out, "data.storage"), r.out);
  BOOST_TEST(has(r.out, "-5.00"), r.out);
  const auto saved = run_cli(runs.dir, {"report", "--json", runs.data});
  const std::string a_json = runs.dir.file("a-report.json");
  std::ofstream(a_json) << saved.out;
  r = run_cli(runs.dir, {"diff", "--json", a_json, runs.compute});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(part_ms(json::parse(r.out)["ranks"][0], "data.storage", "delta_ms") == -5.0, tol);
  // --applied: only the named remedy is judged; the others are not credited.
  const std::string applied = rank["remedies"][0]["id"].get<std::string>();
  r = run_cli(runs.dir, {"diff", "--json", "--applied", applied, runs.data, runs.compute});
  BOOST_TEST(r.exit_code == 0, r.err);
  size_t judged = 0, not_applied = 0;
  const json with_applied = json::parse(r.out);
  for (const auto& m : with_applied["ranks"][0]["remedies"]) {
    if (m["id"] == applied) {
      ++judged;
      BOOST_TEST(m["verdict"] != "not applied");
    } else {
      ++not_applied;
      BOOST_TEST(m["verdict"] == "not applied");
    }
  }
  BOOST_TEST(judged == 1u);
  BOOST_TEST(not_applied + 1 == rank["remedies"].size());
}

BOOST_AUTO_TEST_SUITE_END()
