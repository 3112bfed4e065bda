#include "scope.hpp"

namespace stallscope::analyzer {

RankScope::RankScope(RankTrace& rank) : rank_(rank) {
  for (size_t i = 0; i < rank_.names.size(); ++i)
    names_.try_emplace(rank_.names[i], static_cast<uint32_t>(i));
  for (size_t i = 0; i < rank_.files.size(); ++i)
    files_.try_emplace(rank_.files[i], static_cast<uint32_t>(i));
  for (size_t i = 0; i < rank_.tracks.size(); ++i) {
    const TrackDesc& d = rank_.tracks[i];
    if (d.type == TrackType::kThread && d.tid != 0)
      threads_.try_emplace((uint64_t{d.proc} << 32) | d.tid, static_cast<uint32_t>(i));
  }
}

uint32_t RankScope::name(std::string_view text) {
  if (text.empty()) return 0;
  if (auto it = names_.find(text); it != names_.end()) return it->second;
  const auto id = static_cast<uint32_t>(rank_.names.size());
  rank_.names.emplace_back(text);
  names_.emplace(std::string(text), id);
  return id;
}

uint32_t RankScope::file(std::string_view path) {
  if (path.empty()) return 0;
  if (auto it = files_.find(path); it != files_.end()) return it->second;
  if (rank_.files.size() > RankTrace::kMaxFiles) return RankTrace::kManyFiles;
  const auto id = static_cast<uint32_t>(rank_.files.size());
  rank_.files.emplace_back(path);
  files_.emplace(std::string(path), id);
  return id;
}

uint32_t RankScope::track(TrackDesc d) {
  const bool thread = d.type == TrackType::kThread && d.tid != 0;
  const uint64_t key = (uint64_t{d.proc} << 32) | d.tid;
  if (thread)
    if (auto it = threads_.find(key); it != threads_.end()) return it->second;
  const auto id = static_cast<uint32_t>(rank_.tracks.size());
  if (thread) threads_.emplace(key, id);
  rank_.tracks.push_back(std::move(d));
  return id;
}

uint32_t RankScope::add_track(TrackDesc d) {
  rank_.tracks.push_back(std::move(d));
  return static_cast<uint32_t>(rank_.tracks.size() - 1);
}

}  // namespace stallscope::analyzer
