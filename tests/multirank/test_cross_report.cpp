// The cross-rank section in the three reports: JSON valid against
// docs/report-schema.json (1.1) and holding the straggler, the terminal text
// naming it with its cause, the HTML page with both heatmaps.
#include <fstream>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "analyzer/schema_check.hpp"
#include "multirank/synth_ranks.hpp"
#include "stallscope/analyzer/render.hpp"

namespace an = stallscope::analyzer;

namespace {

an::Report straggler_run() {
  stallscope::testing::SynthSpec s;
  s.stall_ms = {0, 0, 0, 25};
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  return rep;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cross_report)

BOOST_AUTO_TEST_CASE(json_cross_section_matches_the_schema) {
  const an::Report rep = straggler_run();
  std::ostringstream out;
  an::write_json(out, rep);
  const auto j = nlohmann::json::parse(out.str());
  std::ifstream f(STALLSCOPE_REPORT_SCHEMA);
  const auto schema = nlohmann::json::parse(f);
  const auto errs = stallscope::testing::validate(schema, j);
  for (const auto& e : errs) BOOST_TEST_MESSAGE(e);
  BOOST_TEST(errs.empty());
  BOOST_TEST(j["schema_minor"] == stallscope::analyzer::kSchemaMinor);
  BOOST_TEST_REQUIRE(j.contains("cross_rank"));
  BOOST_TEST(j["cross_rank"]["stragglers"][0]["rank"] == 3);
  BOOST_TEST(j["cross_rank"]["stragglers"][0]["cause"] == "storage");
  BOOST_TEST(double(j["ranks"][0]["cross"]["waited_ms"]) > 0);
  BOOST_TEST(j["ranks"][0]["cause"].get<std::string>().find("waiting for rank 3") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(one_rank_json_has_no_cross_section) {
  stallscope::testing::SynthSpec s;
  s.ranks = 1;
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  std::ostringstream out;
  an::write_json(out, rep);
  const auto j = nlohmann::json::parse(out.str());
  BOOST_TEST(!j.contains("cross_rank"));
  BOOST_TEST(!j["ranks"][0].contains("cross"));
}

BOOST_AUTO_TEST_CASE(text_names_the_straggler_and_its_cause) {
  std::ostringstream out;
  an::write_text(out, straggler_run(), {});
  const std::string t = out.str();
  BOOST_TEST(t.find("cross-rank report") != std::string::npos);
  BOOST_TEST(t.find("straggler rank 3") != std::string::npos);
  BOOST_TEST(t.find("its cause: storage") != std::string::npos);
  BOOST_TEST(t.find("imbalance:") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(html_has_both_heatmaps) {
  std::ostringstream out;
  an::write_html(out, straggler_run());
  const std::string h = out.str();
  BOOST_TEST(h.find("step time per rank and step") != std::string::npos);
  BOOST_TEST(h.find("largest part per rank and step") != std::string::npos);
  BOOST_TEST(h.find("<title>rank 3 step 10:") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(many_ranks_show_the_straggler_screen_and_say_how_many_are_left_out) {
  stallscope::testing::SynthSpec s;
  s.ranks = 20;
  s.steps = 30;
  s.stall_ms.assign(20, 0);
  s.stall_ms[13] = 25;
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  std::ostringstream text, html;
  an::write_text(text, rep, {});
  an::write_html(html, rep);
  BOOST_TEST(text.str().find("4 more ranks not shown") != std::string::npos);
  BOOST_TEST(text.str().find("stallscope report — rank 13") != std::string::npos);
  BOOST_TEST(html.str().find("4 more ranks not shown") != std::string::npos);
  BOOST_TEST(html.str().find("<h2>rank 13 ") != std::string::npos);
}

// A run no launcher gave ranks to is one process tree: never "rank -1".
BOOST_AUTO_TEST_CASE(a_report_without_a_rank_is_headed_as_a_single_process) {
  an::Report rep;
  rep.ranks.emplace_back();
  rep.ranks[0].host = "h1";
  std::ostringstream text, html;
  an::write_text(text, rep, {});
  an::write_html(html, rep);
  BOOST_TEST(text.str().find("stallscope report — single process on h1") != std::string::npos,
             text.str());
  BOOST_TEST(text.str().find("rank -1") == std::string::npos);
  BOOST_TEST(html.str().find("<h2>single process h1</h2>") != std::string::npos);
  BOOST_TEST(html.str().find("rank -1") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
