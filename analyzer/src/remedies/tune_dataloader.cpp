// Tune the DataLoader: the trainer waits for data the run could not split
// into storage and preprocessing (no reads or preprocessing tied to the
// batches: a PyTorch profiler trace, or a run whose loader recorded no
// per-batch work, as a DataLoader under the Python hooks). Which knob helps
// is unknown, so the prediction is a bound, and the remedy says how to find
// out.
#include <cmath>

#include "remedy.hpp"

namespace stallscope::analyzer {
namespace {

// The hooks recorded the loader's configuration but not the fetches of
// (some of) its batches: the workers' trace files missing or cut. More
// workers is the setting to try first when CPUs sat idle during the stalls
// (DESIGN.md: never onto busy CPUs) — never prefetch without workers, where
// it does not exist.
void with_setting(const RemedyContext& c, const DataLoaderReport& l, double data, Remedy& m) {
  m.evidence = strf("the trainer waits %.2f ms per step (%.0f %% of the step) for batches whose "
                    "fetch no worker recorded",
                    data, 100.0 * data / c.step_ms);
  m.loader_knob = strf("%llu of the DataLoader's %llu batches have no fetch recorded in a worker "
                       "(its trace file missing or cut), so whether storage or preprocessing is "
                       "slow is unknown for them: try the setting and compare the runs with "
                       "`stallscope diff`",
                       static_cast<unsigned long long>(l.unjoined_batches),
                       static_cast<unsigned long long>(l.batches + l.unjoined_batches));
  m.evidence += strf("; the DataLoader%s%s has num_workers=%u", l.site.empty() ? "" : " at ",
                     l.site.c_str(), l.num_workers);
  m.inputs.push_back({"num_workers", double(l.num_workers), ""});
  const double idle = c.r.cpu.idle_during_stalls;
  if (idle >= 0 && idle < 0.5) {
    m.evidence += strf("; %.1f CPUs idle during stalls: more workers would share busy CPUs", idle);
    m.pytorch_knob = "cache decoded samples, or a lighter transform (no CPU to spare for more workers)";
    return;
  }
  const int extra = std::max(1, idle >= 0 ? static_cast<int>(std::floor(idle + 0.5)) : 1);
  const std::string n = std::to_string(l.num_workers + static_cast<uint32_t>(extra));
  m.title = "Feed the trainer faster: more DataLoader workers";
  m.pytorch_knob = dataloader_knob(l, {{"num_workers", n}});
  m.settings = dataloader_settings(c, l, {{"num_workers", n}});
  m.inputs.push_back({"suggested_workers", double(l.num_workers + extra), ""});
}

// No DataLoader: producers behind a channel or relay the shim recognised
// (FeedReport). Where more_workers sizes them it speaks; else the bound,
// naming who feeds the trainer.
std::optional<Remedy> for_feed(const RemedyContext& c, double data) {
  if (producer_workers(c)) return std::nullopt;
  const FeedReport& f = c.r.feed;
  Remedy m = make_remedy(c, RemedyId::kTuneDataloader, "Feed the trainer faster: its producers do not keep up",
                         "none", "more producers, or less work per item in them (cache, lighter transforms)");
  m.knob_for = "program";
  m.evidence = strf("the trainer waits %.2f ms per step (%.0f %% of the step) for objects from %s",
                    data, 100.0 * data / c.step_ms, f.path.c_str());
  if (f.busy_ms_per_item < 0) m.evidence += "; the producers' CPU was not sampled, so how many keep up is unknown";
  m.model = "bound: step - data_stall";
  m.predicted_step_ms = std::max(0.0, c.step_ms - data);
  m.bound = true;
  m.inputs_from = "assumed";
  m.inputs = {{"data_stall_ms", data, "ms"}, {"step_ms", c.step_ms, "ms"},
              {"producers", double(f.producers.size()), ""}};
  return m;
}

class TuneDataloader final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kTuneDataloader; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const double data = c.ms(Part::kDataUnknown);
    if (c.step_ms <= 0 || data < 0.05 * c.step_ms) return std::nullopt;
    if (c.r.feed.found && fed_loader(c.r) == nullptr) return for_feed(c, data);
    Remedy m = make_remedy(c, RemedyId::kTuneDataloader,
                           "Feed the trainer faster: DataLoader workers, prefetch, pinned memory",
                           "", "DataLoader(num_workers=..., prefetch_factor=..., pin_memory=True, "
                               "persistent_workers=True)");
    const bool imported = c.origin == TraceOrigin::kProfilerImport;
    m.evidence = strf(imported ? "the trainer waits %.2f ms per step in DataLoader.__next__ "
                                 "(%.0f %% of the step); "
                               : "the trainer waits %.2f ms per step for its next batch "
                                 "(%.0f %% of the step); ",
                      data, 100.0 * data / c.step_ms) +
                 (imported ? "the profiler does not trace the workers, so whether storage or "
                             "preprocessing is slow is unknown"
                           : "no reads or preprocessing were tied to the batches, so whether "
                             "storage or preprocessing is slow is unknown");
    m.model = "bound: step - data_stall (the stall's cause inside the DataLoader was not recorded)";
    m.loader_knob =
        imported ? "run the job under `stallscope run` to split the data stall into storage and "
                   "preprocessing"
                 : "the run holds no per-batch record of the loader's work (the Python hooks "
                   "record the trainer's waits, not the DataLoader workers' samples): try the "
                   "settings one at a time and compare the runs with `stallscope diff`, or "
                   "record reads and preprocessing per batch (docs/trace-format.md)";
    m.predicted_step_ms = std::max(0.0, c.step_ms - data);
    m.bound = true;
    m.inputs_from = "assumed";
    m.inputs = {{"data_stall_ms", data, "ms"}, {"step_ms", c.step_ms, "ms"}};
    if (const DataLoaderReport* l = fed_loader(c.r)) {
      // Most batches measured: more_workers proposes the count from them.
      if (fetch_share(*l) >= 0.5 && dataloader_workers(c, *l)) return std::nullopt;
      with_setting(c, *l, data, m);
    }
    if (c.single_process_loader) {
      // Loading ran on the trainer thread: prefetch and persistent workers
      // do not exist without workers, so workers are the setting to try.
      m.title = "Load batches in DataLoader workers";
      m.pytorch_knob = "DataLoader(num_workers=1 or more) (it had num_workers=0: loading ran on the "
                       "trainer thread; prefetch_factor and persistent_workers need workers)";
      m.settings = {{"dataloader", "num_workers", "1"}};
    }
    return m;
  }
};

}  // namespace

const RemedyRule& tune_dataloader_rule() {
  static const TuneDataloader rule;
  return rule;
}

}  // namespace stallscope::analyzer
