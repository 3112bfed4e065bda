// The cross-rank section of the three reports (text, JSON, HTML), kept apart
// from the per-rank renderers it is called from.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

// With more ranks than this, the reports show the screens of the ranks that
// caused or suffered the most wait (the JSON report holds every rank).
inline constexpr size_t kMaxRankScreens = 16;
// Indices into r.ranks of the ranks shown (all of them when few), in order.
std::vector<size_t> shown_ranks(const Report& r);

// A total wait for people: "956.2 ms" below 10 s, "7645.5 s" from there
// (summed over ranks and steps it reaches hours).
std::string total_wait_text(int64_t ns);

// Nothing is written when r.cross.present is false.
void write_cross_text(std::ostream& o, const Report& r, bool color);
nlohmann::json cross_json(const CrossRank& c);
nlohmann::json rank_cross_json(const RankCross& c);
// Per-rank table, stragglers and the rank × step heatmaps of step time and of
// each step's top part (colors: one per part, in Part order).
void write_cross_html(std::ostream& o, const Report& r, const char* const* part_colors);

}  // namespace stallscope::analyzer
