// The HTML report's steps chart and head, in memory: 1,000 steps with a
// long warm-up step and one outlier are bucketed (every step in one bucket,
// the median and the longest named), the axis is scaled to the steady steps
// with the taller ones clipped and marked, parts under 0.5 % fold into
// "other", the verdict and the top remedy come before any chart, and the
// page stays under 500 KB.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "stallscope/analyzer/render.hpp"

namespace an = stallscope::analyzer;

namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// 1,000 steps of 10 ms (compute 6, storage 4), step 0 a 100 ms warm-up,
// step 500 an outlier of 50 ms; host.cpu 0.02 ms in every step (0.2 %).
an::RankReport run() {
  an::RankReport r;
  r.rank = -1;
  r.host = "h";
  r.summary = "input-bound: storage 40 % of step time";
  int64_t t = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    an::StepResult s;
    s.index = i;
    const int64_t wall = i == 0 ? 100'000'000 : i == 500 ? 50'000'000 : 10'000'000 + int64_t(i % 7) * 10'000;
    s.parts[an::idx(an::Part::kHostCpu)] = 20'000;
    s.parts[an::idx(an::Part::kDataStorage)] = wall * 4 / 10;
    s.parts[an::idx(an::Part::kCompute)] = wall - s.parts[an::idx(an::Part::kDataStorage)] - 20'000;
    s.warmup = i == 0;
    s.outlier = i == 500;
    s.start_ns = t;
    s.end_ns = t + wall;
    t = s.end_ns;
    r.steps.push_back(s);
  }
  r.warmup_steps = 1;
  r.steady_steps = 999;
  r.step_p50_ms = 10.03;
  r.step_p90_ms = 10.05;
  r.parts[an::idx(an::Part::kCompute)].share = 0.598;
  r.parts[an::idx(an::Part::kDataStorage)].share = 0.4;
  r.parts[an::idx(an::Part::kHostCpu)].share = 0.002;
  an::Remedy m;
  m.id = "raise_prefetch";
  m.title = "Raise prefetch depth";
  m.pytorch_knob = "DataLoader(prefetch_factor=4)";
  m.step_ms = 10.03;
  m.predicted_step_ms = 6.1;
  r.remedies.push_back(m);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(html_report)

BOOST_AUTO_TEST_CASE(long_runs_are_bucketed_with_every_step_counted_once) {
  const an::RankReport r = run();
  const auto b = an::step_buckets(r, an::step_chart_bars(1));
  BOOST_TEST(b.size() == 200u);  // ceil(1000 / 240) = 5 steps a bucket
  uint64_t next = 0;
  for (const auto& x : b) {
    BOOST_TEST(x.first == next);
    BOOST_TEST(x.steps == x.last - x.first + 1);
    next = x.last + 1;
  }
  BOOST_TEST(next == 1000u);
  BOOST_TEST(b[0].max_index == 0u);
  BOOST_TEST(b[0].max_wall_ns == 100'000'000);
  BOOST_TEST(!b[0].warmup);  // one warm-up step among five
  BOOST_TEST(b[100].outlier);
  BOOST_TEST(b[100].max_index == 500u);
  BOOST_TEST(b[100].median_wall_ns < 10'100'000);  // the median is a usual step
  int64_t sum = 0;
  for (int64_t v : b[100].median_parts) sum += v;
  BOOST_TEST(sum == b[100].median_wall_ns);
  // Few steps: one each.
  BOOST_TEST(an::step_buckets(r, 2000).size() == 1000u);
}

BOOST_AUTO_TEST_CASE(the_axis_is_scaled_to_the_steady_steps_and_taller_steps_are_marked) {
  const an::RankReport r = run();
  const int64_t steady_max = 10'000'000 + 6 * 10'000;
  BOOST_TEST(an::chart_scale_ns(r) == steady_max + steady_max / 10);
  an::Report rep;
  rep.ranks.push_back(run());
  std::ostringstream o;
  an::write_html(o, rep);
  const std::string h = o.str();
  BOOST_TEST(h.size() < 500'000u, h.size());
  // The warm-up bucket and the outlier's: clipped and marked.
  BOOST_TEST(count(h, "<path class=clip ") == 2u);
  BOOST_TEST(h.find("2 bars are taller, clipped and marked") != std::string::npos);
  BOOST_TEST(h.find("steps 500-504: median ") != std::string::npos);
  BOOST_TEST(h.find("longest 50.00 ms (step 500), an outlier") != std::string::npos);
  // host on-CPU (0.2 %) folded into "other", named in its tooltip.
  BOOST_TEST(h.find("<title>other: host on-CPU 0.20 %</title>") != std::string::npos);
  BOOST_TEST(h.find("other (parts under 0.5 %) 0.2 %") != std::string::npos);
  // Verdict, then the top remedy with its setting, before any chart.
  const size_t verdict = h.find("<p class=summary>input-bound: storage 40 % of step time</p>");
  const size_t top = h.find("<p class=top>Top remedy: <b>Raise prefetch depth</b>: <code>DataLoader(prefetch_factor=4)</code>");
  BOOST_TEST(verdict != std::string::npos);
  BOOST_TEST(top != std::string::npos);
  BOOST_TEST(top > verdict);
  BOOST_TEST(top < h.find("<svg"));
  BOOST_TEST(h.find("Step 10.03 ms &rarr; 6.10 ms (39 % faster)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
