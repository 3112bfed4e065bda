// `stallscope topo` text.
#include <cstdio>
#include <sstream>

#include "stallscope/topo/topology.hpp"

namespace stallscope::topo {
namespace {

std::string label(const PciDevice& d, size_t i) {
  switch (d.kind) {
    case DeviceKind::kGpu:
      return "GPU" + std::to_string(d.gpu_index >= 0 ? d.gpu_index : int(i));
    case DeviceKind::kNic:
      return "NIC" + std::to_string(i);
    case DeviceKind::kStorage:
      return "DISK" + std::to_string(i);
    default:
      return "DEV" + std::to_string(i);
  }
}

std::string gbps(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GB/s", v);
  return b;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

void matrix(std::ostringstream& o, const Topology& t) {
  std::vector<const PciDevice*> cols = t.of_kind(DeviceKind::kGpu);
  const auto nics = t.of_kind(DeviceKind::kNic);
  cols.insert(cols.end(), nics.begin(), nics.end());
  if (cols.empty()) return;
  std::vector<std::string> names;
  size_t gpu_i = 0, nic_i = 0;
  for (const auto* d : cols)
    names.push_back(label(*d, d->kind == DeviceKind::kGpu ? gpu_i++ : nic_i++));
  char cell[64];
  o << "\n      ";
  for (const auto& n : names) std::snprintf(cell, sizeof cell, " %-6s", n.c_str()), o << cell;
  o << " CPU affinity     NUMA\n";
  for (size_t r = 0; r < cols.size(); ++r) {
    std::snprintf(cell, sizeof cell, "%-6s", names[r].c_str());
    o << cell;
    for (const auto* c : cols)
      std::snprintf(cell, sizeof cell, " %-6s", relation(t, *cols[r], *c).c_str()), o << cell;
    std::snprintf(cell, sizeof cell, " %-16s %s\n",
                  cols[r]->cpus.empty() ? "?" : cols[r]->cpus.c_str(),
                  cols[r]->numa >= 0 ? std::to_string(cols[r]->numa).c_str() : "N/A");
    o << cell;
  }
  o << "\nLegend: X self; NV# # NVLink links; PIX at most one PCIe bridge; PXB several\n"
       "PCIe bridges; PHB through a PCIe host bridge (CPU); NODE between host bridges\n"
       "of one NUMA node; SYS across NUMA nodes (SMP interconnect).\n";
}

void device_line(std::ostringstream& o, const PciDevice& d, const std::string& name) {
  o << "  " << name << "  " << (d.bus_id.empty() ? "-" : d.bus_id) << "  "
    << (d.os_names.empty() ? "" : join(d.os_names) + "  ") << d.name
    << (d.uuid.empty() ? "" : "  " + d.uuid) << "  NUMA "
    << (d.numa >= 0 ? std::to_string(d.numa) : "?");
  if (d.pcie_max_gen > 0)
    o << "  PCIe Gen" << d.pcie_max_gen << " x" << d.pcie_max_width << " max ("
      << gbps(pcie_gbps(d.pcie_max_gen, d.pcie_max_width)) << " per direction)";
  if (d.link_gbps > 0) o << "  link now " << gbps(d.link_gbps);
  int active = 0;
  for (const auto& l : d.nvlinks) active += l.active;
  if (!d.nvlinks.empty()) o << "  NVLink " << active << "/" << d.nvlinks.size() << " links active";
  o << "\n";
}

}  // namespace

std::string format_text(const Topology& t) {
  std::ostringstream o;
  o << "Host " << (t.hostname.empty() ? "?" : t.hostname) << ": " << t.packages << " package(s), "
    << t.cores << " cores, " << t.pus << " hardware threads\n";
  for (const auto& n : t.numa) {
    char b[128];
    std::snprintf(b, sizeof b, "NUMA node %d: CPUs %s, %.1f GiB\n", n.os_index, n.cpus.c_str(),
                  static_cast<double>(n.memory_bytes) / (1u << 30));
    o << b;
  }
  matrix(o, t);
  o << "\nDevices:\n";
  size_t counts[4] = {};
  for (const auto& d : t.devices) device_line(o, d, label(d, counts[static_cast<int>(d.kind)]++));
  if (t.devices.empty()) o << "  (none found)\n";
  o << "\nNVML: " << (t.nvml.empty() ? "not queried" : t.nvml) << "\n";
  for (const auto& n : t.notes) o << "note: " << n << "\n";
  return o.str();
}

}  // namespace stallscope::topo
