// The cross-rank section of the JSON report (docs/report-schema.md, 1.1).
#include "cross_render.hpp"

namespace stallscope::analyzer {

using nlohmann::json;

namespace {

json clock_json(const ClockAlignment& c) {
  json hosts = json::array();
  for (const auto& h : c.per_host)
    hosts.push_back({{"host", h.host},
                     {"offset_ms", h.offset_ms},
                     {"drift_ppm", h.drift_ppm},
                     {"matched", h.matched},
                     {"residual_us", h.residual_us}});
  return {{"method", c.method},
          {"hosts", c.hosts},
          {"matched", c.matched},
          {"residual_skew_us", c.residual_skew_us},
          {"max_error_ms", c.max_error_ms},
          {"note", c.note},
          {"per_host", std::move(hosts)}};
}

json straggler_json(const Straggler& s) {
  json causes = json::array();
  for (const auto& [name, ns] : s.causes)
    causes.push_back({{"cause", name}, {"ms", double(ns) / 1e6}});
  return {{"rank", s.rank},
          {"host", s.host},
          {"times_last", s.times_last},
          {"instances", s.instances},
          {"p_value", s.p_value},
          {"median_margin_ms", s.median_margin_ms},
          {"caused_ms", double(s.caused_ns) / 1e6},
          {"cause", s.cause},
          {"causes", std::move(causes)}};
}

}  // namespace

json cross_json(const CrossRank& c) {
  json st = json::array();
  for (const auto& s : c.stragglers) st.push_back(straggler_json(s));
  return {{"ranks", c.ranks},
          {"clock", clock_json(c.clock)},
          {"instances", c.instances},
          {"imbalance",
           {{"step_max_over_median", c.step_max_over_median},
            {"arrival_skew_p50_ms", c.arrival_skew_p50_ms},
            {"arrival_skew_p90_ms", c.arrival_skew_p90_ms}}},
          {"straggler_wait_ms", double(c.straggler_wait_ns) / 1e6},
          {"stragglers", std::move(st)},
          {"common_cause", c.common_cause},
          {"verdict", c.verdict},
          {"summary", c.summary}};
}

json rank_cross_json(const RankCross& c) {
  return {{"clock_offset_ms", double(c.clock_offset_ns) / 1e6},
          {"times_last", c.times_last},
          {"instances", c.instances},
          {"p_value", c.p_value},
          {"median_margin_ms", c.median_margin_ms},
          {"waited_ms", double(c.waited_ns) / 1e6},
          {"caused_ms", double(c.caused_ns) / 1e6},
          {"top_cause", c.top_cause}};
}

}  // namespace stallscope::analyzer
