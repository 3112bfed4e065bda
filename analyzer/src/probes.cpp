#include "probes.hpp"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "stallscope/internal/bounded_json.hpp"

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

// GB/s per lane and direction (transfer rate × encoding efficiency: 8b/10b
// to Gen2, 128b/130b Gen3-5, FLIT 242/256 Gen6), as `stallscope topo` uses.
double pcie_gbps(int gen, int width) {
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.984615, 1.969231, 3.938462, 7.5625};
  if (gen < 1 || gen > 6 || width < 1 || width > 32) return 0;
  return kLane[gen] * width;
}

// An integer field kept in a sane range: a wrong file never makes a cast overflow.
int small_int(const json& j, const char* key, int fallback) {
  const double v = num(j, key, fallback);
  return v >= -1 && v <= 1e6 ? static_cast<int>(v) : fallback;
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One "gpu" device of the topology JSON (integrations/topo/src/topo_json.cpp).
// NVML's maximum generation and width give the link; hwloc's current link
// speed is only a fallback, since an idle GPU trains its link down.
GpuLink gpu_link(const json& d) {
  GpuLink g;
  g.index = small_int(d, "gpu_index", -1);
  g.name = str(d, "name");
  g.bus_id = str(d, "bus_id");
  g.pcie_gen = small_int(d, "pcie_max_gen", 0);
  g.pcie_width = small_int(d, "pcie_max_width", 0);
  g.gbps = pcie_gbps(g.pcie_gen, g.pcie_width);
  g.from_max = g.gbps > 0;
  if (!g.from_max) g.gbps = std::max(0.0, num(d, "link_gbps", 0));
  g.numa = small_int(d, "numa", -1);
  g.cpus = str(d, "cpus");
  g.uuid = str(d, "uuid");
  if (auto l = d.find("nvlinks"); l != d.end() && l->is_array())
    for (const auto& link : *l)
      if (auto a = link.is_object() ? link.find("active") : link.end();
          link.is_object() && a != link.end() && a->is_boolean() && a->get<bool>())
        ++g.nvlinks_active;
  return g;
}

// The first file of a rank that recorded a topology wins (one per host).
void topology(const json& j, const std::string& origin, Probes& p) {
  if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array()) {
    p.warnings.push_back(origin + ": attachment \"topology\" has no \"devices\" array;"
                         " topology-based remedies skipped");
    return;
  }
  if (!p.gpus.empty() || p.host_numa_nodes > 0) return;
  for (const auto& d : j["devices"])
    if (d.is_object() && str(d, "kind") == "gpu") p.gpus.push_back(gpu_link(d));
  if (auto n = j.find("numa"); n != j.end() && n->is_array())
    p.host_numa_nodes = static_cast<int>(std::min<size_t>(n->size(), 1024));
}

// One "cuda.device" attachment: {"id", "uuid", "name"} of a device the
// process ran work on.
void cuda_device(const json& j, const std::string& origin, Probes& p) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer()) {
    p.warnings.push_back(origin + ": attachment \"cuda.device\" has no integer \"id\"; ignored");
    return;
  }
  RankDevice d;
  d.id = small_int(j, "id", -1);
  d.uuid = str(j, "uuid");
  d.name = str(j, "name");
  for (const auto& have : p.devices)
    if (have.id == d.id && have.uuid == d.uuid) return;  // several processes, one device
  p.devices.push_back(std::move(d));
}

void apply(const std::string& key, const json& j, Probes& p) {
  if (key == "storage_probe") storage_probe(j, p);
  else if (key == "emulated_device" || key == "topology_probe") device_model(j, p);
  else if (key == "loader" || key == "loader.config") loader(j, p);
  else if (key == "loader.probe") loader_probe(j, p);
  else if (key == "device.model") loader_device(j, p);
}

bool is_probe(const std::string& key) {
  return key == "storage_probe" || key == "emulated_device" || key == "topology_probe" ||
         key == "loader" || key == "loader.config" || key == "loader.probe" ||
         key == "device.model";
}

// An attachment within the limits of stallscope/internal/bounded_json.hpp (depth, size,
// values), or a discarded value and, with `warnings`, a warning naming the
// file and the attachment.
json attachment_json(const reader::Attachment& a, const std::string& file,
                     std::vector<std::string>* warnings) {
  std::string why;
  json j = detail::parse_bounded_json(a.data, &why);
  if (j.is_discarded() && warnings != nullptr)
    warnings->push_back(file + ": attachment \"" + a.name + "\" " + why +
                        (a.name == "topology" ? "; topology-based remedies skipped" : "; ignored"));
  return j;
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
  d.affinity = str(m, "affinity");
  d.quota_cores = num(m, "cgroup_quota_cores", 0);
  d.online_cpus = static_cast<int64_t>(num(m, "online_cpus", 0));
  if (auto it = m.find("cmdline"); it != m.end() && it->is_array()) {
    for (const auto& a : *it)
      if (a.is_string() && d.cmdline.size() < 256) d.cmdline.push_back(a.get<std::string>());
  }
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
    if (a.name != "topology" && a.name != "cuda.device" && !is_probe(a.name)) continue;
    const json j = attachment_json(a, r.path(), &p.warnings);
    if (j.is_discarded()) continue;
    if (a.name == "topology") topology(j, r.path(), p);
    else if (a.name == "cuda.device") cuda_device(j, r.path(), p);
    else apply(a.name, j, p);
  }
}

HostTopology host_topology(const reader::TraceReader& r) {
  Probes p;
  for (const auto& a : r.attachments()) {
    if (a.name != "topology") continue;
    const json j = attachment_json(a, r.path(), nullptr);  // merge_probes warns
    if (!j.is_discarded()) topology(j, r.path(), p);
    if (!p.gpus.empty() || p.host_numa_nodes > 0) break;
  }
  return {std::move(p.gpus), p.host_numa_nodes};
}

const GpuLink* rank_gpu(const Probes& p) {
  for (const auto& d : p.devices) {
    if (d.uuid.empty()) continue;
    for (const auto& g : p.gpus)
      if (g.uuid == d.uuid) return &g;
  }
  return p.gpus.size() == 1 ? &p.gpus[0] : nullptr;
}

const GpuLink* h2d_link(const Probes& p) {
  if (const GpuLink* mine = rank_gpu(p); mine != nullptr && mine->gbps > 0) return mine;
  const GpuLink* best = nullptr;
  for (const auto& g : p.gpus) {
    if (g.gbps <= 0) continue;
    if (best == nullptr || (g.from_max && !best->from_max) ||
        (g.from_max == best->from_max && g.gbps < best->gbps))
      best = &g;
  }
  return best;
}

std::string describe_link(const GpuLink& g) {
  char b[160];
  if (g.from_max)
    std::snprintf(b, sizeof b, "PCIe Gen%d x%d, %.0f GB/s", g.pcie_gen, g.pcie_width, g.gbps);
  else
    std::snprintf(b, sizeof b,
                  "current PCIe link %.1f GB/s (hwloc; maximum unknown, an idle GPU runs below it)",
                  g.gbps);
  std::string s = b;
  if (!g.name.empty()) s = g.name + ", " + s;
  return s;
}

}  // namespace stallscope::analyzer
