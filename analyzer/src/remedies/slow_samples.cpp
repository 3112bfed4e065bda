// Slow samples at the head of the line: a few dataset items far slower than
// the rest (a huge file, a cold object, a retried read) hold up the batch
// they are in while the trainer waits for it; no DataLoader setting makes
// them fast, so the remedy names them — their indices and files — and
// bounds what making them as fast as the median would give.
#include <algorithm>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// "17 (…/0017.z), 42": the slowest few, with their files.
std::string named(const DataLoaderReport& l, size_t most) {
  std::string s;
  for (size_t i = 0; i < l.slow_samples.size() && i < most; ++i) {
    const LoaderSlowSample& x = l.slow_samples[i];
    s += (i ? ", " : "") + std::to_string(x.index);
    if (!x.file.empty()) s += " (" + x.file + ")";
  }
  if (l.slow_samples.size() > most || l.slow_sample_count > l.slow_samples.size()) s += ", …";
  return s;
}

class SlowSamples final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kSlowSamples; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const DataLoaderReport* l = fed_loader(c.r);
    const double data = c.data_ms();
    if (l == nullptr || l->slow_samples.empty() || l->batches == 0 || data < 0.1 * c.step_ms)
      return std::nullopt;
    // What they held the trainer up: its waits on their batches beyond a
    // typical wait (at most their time beyond the median sample), per step.
    const double steps = double(std::max<size_t>(c.r.steps.size(), 1));
    const double waits_per_step = l->waits_in_steps > 0 ? double(l->waits_in_steps) / steps : 1.0;
    const double per_step =
        std::min(data, l->slow_sample_stall_ms / double(l->batches) * waits_per_step);
    if (per_step < 0.02 * c.step_ms) return std::nullopt;
    const LoaderSlowSample& top = l->slow_samples.front();
    Remedy m = make_remedy(
        c, RemedyId::kSlowSamples, "Make the slowest samples as fast as the rest", "none",
        strf("dataset %s, samples %s take up to %.1f ms against a %.2f ms median: re-encode, "
             "shrink or split those items, move their files to faster storage, or cache them",
             l->dataset.empty() ? "?" : l->dataset.c_str(), named(*l, 4).c_str(), top.ms,
             l->sample_p50_ms));
    m.bound = true;
    m.predicted_step_ms = c.step_ms - per_step;
    m.model = "bound: step - min(data_stall, sum over the waits on batches holding the tail's samples "
              "of min(wait - median wait, their time - median sample) / batches waited for * waits "
              "per step); the tail: samples at max(5 x median, median + 1 ms, "
              "slowest / 4) or more, at most 5 % of them, in batches the trainer waited for";
    m.evidence = strf("%.0f of the %.0f samples timed in the batches the trainer waited for took "
                      "5x the median (%.2f ms) or more, %.1f ms beyond it in all (p99 %.2f ms), "
                      "and held the trainer's waits %.1f ms beyond a typical wait; the slowest: "
                      "index %.0f, %.1f ms",
                      double(l->slow_sample_count), double(l->samples_timed), l->sample_p50_ms,
                      l->slow_sample_excess_ms, l->sample_p99_ms, l->slow_sample_stall_ms,
                      double(top.index), top.ms);
    if (!top.file.empty()) m.evidence += " (" + top.file + ")";
    if (l->site.empty()) m.evidence += "; DataLoader at an unknown line";
    else m.evidence += "; DataLoader at " + l->site;
    m.inputs = {{"slow_samples", double(l->slow_sample_count), ""},
                {"samples_timed", double(l->samples_timed), ""},
                {"sample_p50_ms", l->sample_p50_ms, "ms"},
                {"sample_p99_ms", l->sample_p99_ms, "ms"},
                {"slowest_ms", top.ms, "ms"},
                {"excess_ms", l->slow_sample_excess_ms, "ms"},
                {"stall_ms", l->slow_sample_stall_ms, "ms"}};
    return m;
  }
};

}  // namespace

const RemedyRule& slow_samples_rule() {
  static const SlowSamples rule;
  return rule;
}

}  // namespace stallscope::analyzer
