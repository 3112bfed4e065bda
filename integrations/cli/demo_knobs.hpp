// The sample trainer's flag for each remedy of the analyzer's catalog
// (docs/remedies.md): what `stallscope demo` and the scenario suite change
// to apply the top remedy. Header-only so the scenario suite can use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace trainer {

struct KnobChange {
  std::string add;     // a flag to append (the last value of a flag wins)
  std::string remove;  // a flag to drop
  std::string note;    // what this means, for people
  bool applicable() const { return !add.empty() || !remove.empty(); }
};

// `input(name)` returns the remedy's input value, or -1 when absent.
inline KnobChange knob_for_remedy(const std::string& id, const std::function<double(const char*)>& input) {
  if (id == "pinned_memory") return {"--loader-pinned=on", "", "stage batches in pinned memory"};
  if (id == "more_workers") {
    const double w = std::max(2.0, std::round(input("suggested_workers")));
    return {"--loader-workers=" + std::to_string(static_cast<int>(w)), "",
            "use " + std::to_string(static_cast<int>(w)) + " preprocessing workers"};
  }
  if (id == "raise_prefetch") return {"--loader-prefetch=16", "", "keep 16 batches in flight"};
  if (id == "raise_queue_depth") return {"--loader-queue-depth=64", "", "keep 64 reads in flight"};
  if (id == "overlap_copies")  // the loader's own copy stream, batches copied ahead
    return {"--loader-prefetch=4", "--copy-in-step", "copy the next batch on a copy stream while computing"};
  if (id == "avoid_sync") return {"", "--sync-each-step", "stop blocking on the device every step"};
  if (id == "overlap_comm") return {"--overlap-comm", "", "all-reduce gradient buckets during backward"};
  if (id == "cache_decoded") return {"--decode-us=0", "", "cache decoded samples (augment cost gone)"};
  return {};
}

inline std::vector<std::string> apply_knob(std::vector<std::string> args, const KnobChange& k) {
  if (!k.remove.empty()) std::erase(args, k.remove);
  if (!k.add.empty()) args.push_back(k.add);
  return args;
}

}  // namespace trainer
