// The report's host-gaps block (HostGapReport) from the run's gap totals.
#include <algorithm>

#include "host_gaps.hpp"

namespace stallscope::analyzer {

namespace {

constexpr size_t kTopPerClass = 5, kTopOverall = 8;

std::string_view kind_key(ActivityKind k) {
  switch (k) {
    case ActivityKind::kAnnotation: return "annotation";
    case ActivityKind::kPython: return "python";
    case ActivityKind::kOperator: return "cpu_op";
    case ActivityKind::kApiCall: return "api";
    case ActivityKind::kSync: return "sync";
    case ActivityKind::kStackSample: return "stack_sample";
  }
  return "cpu_op";
}

// An activity's name, or what it was when the trace named none.
std::string label(const std::vector<std::string>& names, uint32_t id, ActivityKind k) {
  if (id != 0 && id < names.size() && !names[id].empty()) return names[id];
  switch (k) {
    case ActivityKind::kApiCall: return "(CUDA API call)";
    case ActivityKind::kSync: return "(synchronization)";
    case ActivityKind::kStackSample: return "(stack sample)";
    default: return "(unnamed)";
  }
}

std::string name_of(const std::vector<std::string>& names, uint32_t id) {
  return id != 0 && id < names.size() ? names[id] : std::string();
}

std::string made_by(const std::vector<std::string>& names, uint32_t op, uint32_t frame) {
  std::string s;
  if (op != 0) s = name_of(names, op);
  if (frame != 0) s += (s.empty() ? "" : " in ") + name_of(names, frame);
  return s;
}

template <typename Map>
auto largest(const Map& m) {
  auto best = m.end();
  for (auto it = m.begin(); it != m.end(); ++it)
    if (best == m.end() || it->second > best->second) best = it;
  return best;
}

void sort_top(std::vector<GapActivity>& v, size_t keep) {
  std::stable_sort(v.begin(), v.end(), [](const GapActivity& a, const GapActivity& b) {
    return a.ms != b.ms ? a.ms > b.ms : a.name < b.name;
  });
  if (v.size() > keep) v.resize(keep);
}

}  // namespace

std::string_view gap_class_key(GapClass c) noexcept {
  switch (c) {
    case GapClass::kSync: return "sync";
    case GapClass::kLaunch: return "launch";
    case GapClass::kCpuOp: return "cpu_op";
    case GapClass::kData: return "data";
    default: return "untraced";
  }
}

void fill_host_gaps(HostGapReport& r, const GapTotals& t, const std::vector<std::string>& names) {
  r.analyzed = true;
  const double n = t.steps > 0 ? double(t.steps) : 1;
  const int64_t wall_ns = t.wall_ns;
  const GapNs& class_ns = t.class_ns;
  auto per_step = [n](int64_t ns) { return double(ns) / 1e6 / n; };
  r.host_ms = per_step(t.host_ns);
  std::unordered_map<uint64_t, int64_t> overall;  // (kind, name) over the classes
  for (size_t c = 0; c < kGapClassCount; ++c) {
    GapClassStat& s = r.classes[c];
    s.cls = static_cast<GapClass>(c);
    s.ms = per_step(class_ns[c]);
    s.share = wall_ns > 0 ? double(class_ns[c]) / double(wall_ns) : 0;
    s.gaps = t.gaps[c];
    s.launch_ms = per_step(t.launch_ns[c]);
  }
  for (const auto& [key, ns] : t.activity) {
    const auto c = static_cast<size_t>(key >> 40);
    const auto kind = static_cast<ActivityKind>((key >> 32) & 0xff);
    GapActivity a{label(names, static_cast<uint32_t>(key), kind), std::string(kind_key(kind)), per_step(ns)};
    if (c < kGapClassCount) r.classes[c].top.push_back(std::move(a));
    overall[key & 0xff'ffff'ffffull] += ns;
  }
  std::vector<GapActivity> all;
  for (const auto& [key, ns] : overall) {
    const auto kind = static_cast<ActivityKind>(key >> 32);
    all.push_back({label(names, static_cast<uint32_t>(key), kind), std::string(kind_key(kind)), per_step(ns)});
  }
  for (GapClassStat& s : r.classes) sort_top(s.top, kTopPerClass);
  sort_top(all, kTopOverall);
  r.top = std::move(all);
  uint64_t gaps = 0;
  for (uint64_t g : t.gaps) gaps += g;
  r.gap_count = double(gaps) / n;
  r.launches = double(t.launches) / n;
  r.optimizer_ms = per_step(t.optimizer_ns);
  if (auto it = largest(t.optimizer); it != t.optimizer.end()) r.optimizer = name_of(names, it->first);
  r.logging_ms = per_step(t.logging_ns);
  if (auto it = largest(t.logging); it != t.logging.end()) r.logging = name_of(names, it->first);
  if (auto it = largest(t.sync_calls); it != t.sync_calls.end()) {
    r.sync_call = label(names, it->first.call, it->first.kind);
    r.sync_made_by = made_by(names, it->first.op, it->first.frame);
  }
  std::vector<GapEntry> longest = t.longest;
  std::sort(longest.begin(), longest.end(), [](const GapEntry& a, const GapEntry& b) {
    return a.len != b.len ? a.len > b.len : a.step < b.step;
  });
  for (const GapEntry& e : longest)
    r.longest.push_back({e.step, double(e.start_rel) / 1e6, double(e.len) / 1e6, e.cls,
                         e.top != 0 || e.cls == GapClass::kSync ? label(names, e.top, e.top_kind) : "",
                         made_by(names, e.made_op, e.made_frame)});
}

}  // namespace stallscope::analyzer
