// stallscope analyzer — trace files in, a Report out: steps, the exclusive
// attribution of each step's wall time, the capacity model, the root cause
// and remedies with predicted step times (DESIGN.md).
//
// Quickstart:
//
//   stallscope::analyzer::AnalyzeOptions opt;
//   auto report = stallscope::analyzer::analyze_paths({"stallscope-run/"}, opt);
//   stallscope::analyzer::write_text(std::cout, report, {});
//
// Streaming: each file is read once; memory holds a window of events per
// rank, the lineage of recent batches and a few chunks of each rank's step
// and collective tables, the rest of which go to a scratch file
// (docs/report-guide.md "Memory"; spill_vector.hpp). Throws AnalyzeError
// only for unusable options (a bad --step-pattern); bad input becomes
// warnings and errors inside the Report.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/analyzer/report.hpp"

namespace stallscope::analyzer {

class AnalyzeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The default step pattern: ProfilerStep#N, step, train_step, iteration
// (optionally followed by a number), case-insensitive.
inline constexpr const char* kDefaultStepPattern =
    R"(^(profilerstep#\d+|(train_)?step|iteration)([ _#:.-]*\d+)?$)";

struct AnalyzeOptions {
  std::string step_pattern = kDefaultStepPattern;  // ECMAScript, matched case-insensitively
  // Events seen before the step source is chosen (the first window).
  size_t decide_events = size_t{1} << 18;
  // Events reaching the engine this long after a step's end still count
  // toward it (recorder flush lag); later ones are counted as late. With
  // adaptive_lag, lag_ns is the most it waits: once min(lag_ns, 4 ×
  // min_lag_ns) of a file has been read, the wait follows 4 × the latest
  // any event of a file has arrived so far (behind the newest end read
  // before it), never below min_lag_ns. The wait sets the window held in memory.
  int64_t lag_ns = 2'000'000'000;
  int64_t min_lag_ns = 250'000'000;
  bool adaptive_lag = true;
  // Lineage (reads, preprocessing, batches) is kept this long behind the
  // step being attributed: a batch prefetched earlier than this is unsplit.
  int64_t lineage_horizon_ns = 60'000'000'000;
  int64_t sample_period_ns = 10'000'000;  // sampler period when metadata lacks it
  size_t warmup_max = 20;                 // warm-up never exceeds this many steps
  double outlier_factor = 2.0;            // outlier: wall >= factor × median step
  size_t max_outliers = 10;
  size_t max_remedies = 5;
  // The most decompressed JSON one PyTorch profiler trace may have (a
  // gzip's inflated size is checked while streaming).
  uint64_t max_json_bytes = uint64_t{2} << 30;
  // Ranks analyzed at once on oneTBB threads (0 = all cores). Memory grows
  // with it (one window per rank in flight). The report is the same.
  size_t rank_threads = 1;
  // Called now and then with (bytes read, bytes total), one call at a time
  // (from the analyzing threads); empty = silent.
  std::function<void(uint64_t, uint64_t)> progress;
};

// Analyzes trace files and run directories (several processes and ranks;
// files are grouped by the `rank` of their metadata, then by host).
Report analyze_paths(const std::vector<std::string>& paths, const AnalyzeOptions& opt);

// Analyzes one rank held in memory (events in any order). The core of
// analyze_paths, for tests and tools that build events themselves.
RankReport analyze_rank(const RankTrace& trace, const AnalyzeOptions& opt);

// Headspace (headspace.cpp): a `stallscope run --headspace` run's step,
// the ceiling of the ordinary run `rep` (each rank from the same rank, else
// the first), and the loading's cost beyond its waits (step − data stall −
// ceiling, where over 5 % of the step). `from` names the headspace run.
void apply_headspace(Report& rep, const Report& headspace, const std::string& from);
// The data parts of a rank's median steady step, in ms.
double data_stall_ms(const RankReport& r);

}  // namespace stallscope::analyzer
