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
  BOOST_TEST(h.find("step time per rank and step bucket") != std::string::npos);
  BOOST_TEST(h.find("largest part per rank and step bucket") != std::string::npos);
  // 60 steps in 40 buckets or fewer: 2 steps a cell.
  BOOST_TEST(h.find("<title>r3 steps 10-11: median ") != std::string::npos);
}

// Every rank spends a third of its step in exposed transfer; which rank
// arrives last is chance (its compute jitter). The headline says
// communication-bound, as each rank's verdict does, in the text, JSON and
// HTML reports; what the ranks waited for comes after it.
BOOST_AUTO_TEST_CASE(headline_uses_the_per_rank_verdict_on_a_comm_bound_run) {
  stallscope::testing::SynthSpec s;
  s.ranks = 4;
  s.compute_ms = 20;
  s.transfer_ms = 12;
  s.arrival_jitter_ms = 0.5;
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  BOOST_TEST_REQUIRE(rep.cross.present);
  for (const auto& rk : rep.ranks)
    BOOST_TEST(rk.cause.rfind("communication-bound: comm transfer", 0) == 0, rk.cause);
  const std::string& v = rep.cross.verdict;
  BOOST_TEST(v.rfind("communication-bound on all 4 ranks: comm transfer ", 0) == 0, v);
  BOOST_TEST(v.find("% of step time (median over ranks)") != std::string::npos, v);
  BOOST_TEST_MESSAGE(rep.cross.summary);
  BOOST_TEST(rep.cross.summary.rfind(v, 0) == 0, rep.cross.summary);
  BOOST_TEST(rep.cross.summary.find("all ranks: ") == std::string::npos, rep.cross.summary);
  std::ostringstream text, json, html;
  an::write_text(text, rep, {});
  an::write_json(json, rep);
  an::write_html(html, rep);
  BOOST_TEST(text.str().find(v) != std::string::npos);
  const auto j = nlohmann::json::parse(json.str());
  BOOST_TEST(j["cross_rank"]["verdict"] == v);
  BOOST_TEST(j["cross_rank"]["summary"].get<std::string>().rfind(v, 0) == 0);
  BOOST_TEST(html.str().find("<p class=summary>" + v) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(ranks_with_different_verdicts_are_counted) {
  stallscope::testing::SynthSpec s;
  s.ranks = 4;
  s.stall_ms = {0, 0, 0, 25};
  an::Report rep = stallscope::testing::synth_report(stallscope::testing::synth_run(s));
  an::analyze_cross_rank(rep, {});
  const std::string& v = rep.cross.verdict;
  // Rank 3 stalls on storage; the others wait for it.
  BOOST_TEST(v.rfind("mixed verdicts: 3 ranks ", 0) == 0, v);
  BOOST_TEST(v.find("1 rank input-bound") != std::string::npos, v);
}

// 256 ranks on 32 nodes × 1,000 steps, built in memory: the cross-rank
// section stays within 500 KB, one row per node and one cell per bucket of
// 25 steps (40 columns), never one per step.
BOOST_AUTO_TEST_CASE(a_256_by_1000_page_is_bucketed_and_small) {
  an::Report rep;
  constexpr size_t kRanks = 256, kSteps = 1000;
  for (size_t r = 0; r < kRanks; ++r) {
    an::RankReport rk;
    rk.rank = int64_t(r);
    rk.host = "node" + std::to_string(r / 8);
    int64_t t = 0;
    for (size_t i = 0; i < kSteps; ++i) {
      an::StepResult st;
      st.index = i;
      st.warmup = i == 0;
      const int64_t compute = 20'000'000 + int64_t((r * 7 + i * 13) % 97) * 10'000;
      const int64_t transfer = i == 500 && r == 77 ? 60'000'000 : 8'000'000;
      st.parts[an::idx(an::Part::kCompute)] = compute;
      st.parts[an::idx(an::Part::kCommTransfer)] = transfer;
      st.start_ns = t;
      st.end_ns = t + compute + transfer;
      t = st.end_ns;
      rk.steps.push_back(st);
    }
    rk.steady_steps = kSteps - 1;
    rk.warmup_steps = 1;
    rk.step_p50_ms = 28.5;
    rk.cause = "communication-bound: comm transfer 28 % of step time";
    rep.ranks.push_back(std::move(rk));
  }
  rep.cross.present = true;
  rep.cross.ranks = kRanks;
  rep.cross.verdict = "communication-bound on all 256 ranks";
  rep.cross.summary = rep.cross.verdict;
  std::ostringstream out;
  an::write_html(out, rep);
  const std::string h = out.str();
  const size_t a = h.find("<section><h2>across 256 ranks");
  BOOST_TEST_REQUIRE(a != std::string::npos);
  const size_t b = h.find("</section>", a);
  BOOST_TEST_REQUIRE(b != std::string::npos);
  const std::string cross = h.substr(a, b - a);
  BOOST_TEST_MESSAGE("cross-rank section " << cross.size() << " bytes, whole page " << h.size());
  BOOST_TEST(cross.size() <= 500'000u);
  BOOST_TEST(h.size() <= 500'000u, "the whole page, the 16 rank screens with it");
  BOOST_TEST(h.find("step time per node and step bucket") != std::string::npos);
  const auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t p = cross.find(needle); p != std::string::npos; p = cross.find(needle, p + 1)) ++n;
    return n;
  };
  // 32 nodes × 40 buckets in each of the two maps.
  BOOST_TEST(count("<title>node") == 2u * 32u * 40u);
  BOOST_TEST(count("<title>node0 steps 975-999:") == 2u);
  BOOST_TEST(count(" steps 500-500") == 0u);  // no cell of one step
  // The outlier (rank 77 on node9, step 500) is marked in its bucket.
  BOOST_TEST(count("class=outlier") == 1u);
  BOOST_TEST(cross.find("<title>node9 steps 500-524: median ") != std::string::npos);
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
