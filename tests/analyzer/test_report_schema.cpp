// Black-box: the JSON report of a real run validates against
// docs/report-schema.json, and the validator rejects a report that lacks a
// field, has a wrong type or a newer version (so the check can fail).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "analyzer/schema_check.hpp"
#include "analyzer/trace_files.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"

using namespace stallscope::testing;
namespace an = stallscope::analyzer;

namespace {

json load_schema() {
  std::ifstream in(STALLSCOPE_REPORT_SCHEMA);
  BOOST_REQUIRE_MESSAGE(in.good(), "cannot open " STALLSCOPE_REPORT_SCHEMA);
  return json::parse(in);
}

json report_of_run() {
  TempDir dir;
  write_trainer(dir.file("h1-r0-4242.sst"), 8);
  write_worker(dir.file("h1-r0-4243.sst"), 8);
  std::ostringstream out;
  an::write_json(out, an::analyze_paths({dir.path()}, {}));
  return json::parse(out.str());
}

bool mentions(const std::vector<std::string>& errs, const std::string& what) {
  for (const auto& e : errs)
    if (e.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(report_schema)

BOOST_AUTO_TEST_CASE(report_of_a_run_validates) {
  const json doc = report_of_run();
  BOOST_REQUIRE(!doc["ranks"].empty());
  BOOST_REQUIRE(!doc["ranks"][0]["step_table"].empty());
  const auto errs = validate(load_schema(), doc);
  for (const auto& e : errs) BOOST_TEST_MESSAGE(e);
  BOOST_TEST(errs.empty());
}

BOOST_AUTO_TEST_CASE(report_missing_a_field_fails) {
  json doc = report_of_run();
  doc["ranks"][0].erase("parts");
  doc["ranks"][0]["step_table"][0].erase("parts_ns");
  const auto errs = validate(load_schema(), doc);
  BOOST_TEST(mentions(errs, "/ranks/0: missing required key 'parts'"));
  BOOST_TEST(mentions(errs, "/ranks/0/step_table/0: missing required key 'parts_ns'"));
}

BOOST_AUTO_TEST_CASE(wrong_type_or_newer_version_fails) {
  json doc = report_of_run();
  doc["schema_version"] = 2;
  doc["ranks"][0]["events"] = "many";
  doc["ranks"][0]["remedies"] = json::array({{{"id", 3}}});
  const auto errs = validate(load_schema(), doc);
  BOOST_TEST(mentions(errs, "/schema_version: expected 1"));
  BOOST_TEST(mentions(errs, "/ranks/0/events: not of type integer"));
  BOOST_TEST(mentions(errs, "/ranks/0/remedies/0/id: not of type string"));
}

// A DataLoader run (issue #23): its dataloaders, settings, phases and the
// remedy's try command validate too, and a wrong one does not.
BOOST_AUTO_TEST_CASE(report_of_a_dataloader_run_validates) {
  TempDir dir;
  write_dataloader_run(dir.file("h1-r0-5252.sst"), dir.file("h1-r0-5253.sst"));
  std::ostringstream out;
  an::write_json(out, an::analyze_paths({dir.path()}, {}));
  json doc = json::parse(out.str());
  BOOST_REQUIRE_EQUAL(doc["ranks"][0]["dataloaders"].size(), 1u);
  BOOST_REQUIRE(!doc["ranks"][0]["dataloaders"][0]["workers"].empty());
  const auto errs = validate(load_schema(), doc);
  for (const auto& e : errs) BOOST_TEST_MESSAGE(e);
  BOOST_TEST(errs.empty());
  doc["ranks"][0]["dataloaders"][0]["config"]["pin_memory"] = "maybe";
  doc["ranks"][0]["dataloaders"][0].erase("wait_split_ms");
  const auto bad = validate(load_schema(), doc);
  BOOST_TEST(mentions(bad, "/ranks/0/dataloaders/0: missing required key 'wait_split_ms'"));
  BOOST_TEST(mentions(bad, "/ranks/0/dataloaders/0/config/pin_memory"));
}

BOOST_AUTO_TEST_SUITE_END()
