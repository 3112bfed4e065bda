#include "probes.hpp"

#include <nlohmann/json.hpp>

namespace stallscope::analyzer {

namespace {

using nlohmann::json;

double num(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

void storage_probe(const json& j, Probes& p) {
  if (!j.is_object()) return;
  if (j.contains("tier") && j["tier"].is_string()) p.storage_tier = j["tier"].get<std::string>();
  auto pts = j.find("points");
  if (pts == j.end() || !pts->is_array()) return;
  for (const auto& pt : *pts) {
    if (!pt.is_object()) continue;
    p.storage.push_back({num(pt, "queue_depth", 0), num(pt, "read_bytes", 0), num(pt, "bytes_per_s", 0)});
  }
}

void device_model(const json& j, Probes& p) {
  if (!j.is_object()) return;
  p.pinned_gbps = num(j, "pinned_gbps", p.pinned_gbps);
  p.pageable_gbps = num(j, "pageable_gbps", p.pageable_gbps);
  p.local_bytes_per_s = num(j, "local_read_bytes_per_s", p.local_bytes_per_s);
}

void loader(const json& j, Probes& p) {
  if (!j.is_object()) return;
  p.workers = num(j, "workers", p.workers);
  p.prefetch_batches = num(j, "prefetch_batches", p.prefetch_batches);
  p.queue_depth = num(j, "queue_depth", p.queue_depth);
  p.read_size = num(j, "read_size", p.read_size);
  if (j.contains("pinned") && j["pinned"].is_boolean()) p.pinned = j["pinned"].get<bool>() ? 1 : 0;
}

// The loader's own attachments (docs/loader.md): "loader.probe" holds
// {tier, read_size, rates: [{queue_depth, mb_per_s, …}]}, "device.model"
// {h2d_pinned_gbps, h2d_pageable_gbps}, "loader.config" the loader's knobs.
void loader_probe(const json& j, Probes& p) {
  if (!j.is_object()) return;
  if (j.contains("tier") && j["tier"].is_string()) p.storage_tier = j["tier"].get<std::string>();
  auto rates = j.find("rates");
  if (rates == j.end() || !rates->is_array()) return;
  const double read_size = num(j, "read_size", 0);
  for (const auto& r : *rates) {
    if (!r.is_object()) continue;
    p.storage.push_back({num(r, "queue_depth", 0), read_size, num(r, "mb_per_s", 0) * 1e6});
  }
}

void loader_device(const json& j, Probes& p) {
  if (!j.is_object()) return;
  p.pinned_gbps = num(j, "h2d_pinned_gbps", p.pinned_gbps);
  p.pageable_gbps = num(j, "h2d_pageable_gbps", p.pageable_gbps);
}

void apply(const std::string& key, const json& j, Probes& p) {
  if (key == "storage_probe") storage_probe(j, p);
  else if (key == "emulated_device" || key == "topology_probe") device_model(j, p);
  else if (key == "loader" || key == "loader.config") loader(j, p);
  else if (key == "loader.probe") loader_probe(j, p);
  else if (key == "device.model") loader_device(j, p);
}

}  // namespace

ProcessDesc process_of(const reader::TraceReader& r) {
  ProcessDesc d;
  d.file = r.path();
  d.host = r.host();
  if (r.header_valid()) {
    d.pid = r.header().pid;
    d.ppid = r.header().parent_pid;
  }
  const json m = json::parse(r.metadata_json(), nullptr, false);
  if (!m.is_object()) return d;
  d.affinity_cpus = static_cast<int64_t>(num(m, "affinity_count", 0));
  d.quota_cores = num(m, "cgroup_quota_cores", 0);
  d.online_cpus = static_cast<int64_t>(num(m, "online_cpus", 0));
  return d;
}

void merge_probes(const reader::TraceReader& r, Probes& p) {
  const json m = json::parse(r.metadata_json(), nullptr, false);
  if (m.is_object()) {
    for (const char* key : {"storage_probe", "emulated_device", "topology_probe", "loader"})
      if (m.contains(key)) apply(key, m[key], p);
    if (m.contains("config") && m["config"].is_object()) {
      const double ms = num(m["config"], "sample_ms", 0);
      if (ms > 0) p.sample_period_ns = static_cast<int64_t>(ms * 1e6);
    }
  }
  for (const auto& a : r.attachments()) {
    const json j = json::parse(a.data, nullptr, false);
    if (!j.is_discarded()) apply(a.name, j, p);
  }
}

}  // namespace stallscope::analyzer
