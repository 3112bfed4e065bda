// The one owner of every mapping from a producer's scope (a trace file, an
// imported profiler trace) to its rank's: names, files and tracks. Both the
// .sst converter (convert.hpp) and the PyTorch-trace mapper
// (kineto/kineto_map.cpp) intern through it, so a rank's forked workers,
// each with its own file and string ids, share one id per name, per file
// path and per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "stallscope/analyzer/model.hpp"

namespace stallscope::analyzer {

class RankScope {
 public:
  explicit RankScope(RankTrace& rank);
  RankTrace& rank() { return rank_; }

  // The rank's id of a name ("" = 0).
  uint32_t name(std::string_view text);
  // The id of a name already known, else 0.
  uint32_t known_name(std::string_view text) const {
    auto it = names_.find(text);
    return it == names_.end() ? 0 : it->second;
  }
  // The rank's id of a file path ("" = 0; past RankTrace::kMaxFiles distinct
  // paths, RankTrace::kManyFiles).
  uint32_t file(std::string_view path);
  // The rank's track for `d`. Thread tracks of one process with the same
  // tid are one thread (records written on its behalf by another thread,
  // CUDA API calls delivered by the CUPTI thread, join the thread's own).
  uint32_t track(TrackDesc d);
  // A new track, never merged: for producers with their own identities.
  uint32_t add_track(TrackDesc d);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  using Index = std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>>;
  RankTrace& rank_;
  Index names_, files_;
  std::unordered_map<uint64_t, uint32_t> threads_;  // (proc, tid) -> track
};

}  // namespace stallscope::analyzer
