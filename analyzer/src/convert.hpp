// Conversion of one file's decoded records (reader::Event) into the
// analyzer's compact events on the rank's tracks and names; and progress
// reporting over a set of files.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::analyzer {

class FileConverter {
 public:
  // Adds the file's tracks to `rank` (process index `proc`).
  FileConverter(const reader::TraceReader& r, RankTrace& rank, uint32_t proc);
  // The converted event; valid until the next call.
  const Ev& convert(const reader::Event& e);

 private:
  uint32_t track_of(uint32_t file_track);
  uint32_t name_of(uint32_t file_name);

  const reader::TraceReader& r_;
  RankTrace& rank_;
  uint32_t proc_;
  std::vector<uint32_t> dense_;  // small file track id -> rank track + 1 (0 = not yet)
  std::unordered_map<uint32_t, uint32_t> tracks_;  // the others
  std::vector<uint32_t> names_;  // file string id -> rank name id + 1 (0 = not yet)
  std::unordered_map<std::string, uint32_t> interned_;
  Ev ev_;
};

class Progress {
 public:
  Progress(std::function<void(uint64_t, uint64_t)> fn,
           const std::vector<std::unique_ptr<reader::TraceReader>>& readers);
  // `r` has reached byte `offset`.
  void tick(const reader::TraceReader& r, uint64_t offset) const;

 private:
  std::function<void(uint64_t, uint64_t)> fn_;
  uint64_t total_ = 0;
  mutable uint64_t done_ = 0, last_report_ = 0;
  mutable std::unordered_map<const reader::TraceReader*, uint64_t> at_;
};

}  // namespace stallscope::analyzer
