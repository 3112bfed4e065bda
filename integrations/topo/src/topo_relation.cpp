// Relations between devices (nvidia-smi topo -m's vocabulary) and PCIe
// link arithmetic.
#include <cstdio>
#include <cstdlib>

#include "stallscope/topo/topology.hpp"
#include "topo_internal.hpp"

namespace stallscope::topo {

std::string format_bus_id(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char b[32];
  std::snprintf(b, sizeof b, "%04x:%02x:%02x.%x", domain & 0xffffu, bus & 0xffu, dev & 0x1fu,
                func & 0x7u);
  return b;
}

std::string normalize_bus_id(std::string_view id) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  const std::string s(id);
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func) == 4)
    return format_bus_id(domain, bus, dev, func);
  return s;
}

double pcie_gbps(int gen, int width) {
  // GB/s per lane and direction: transfer rate times encoding efficiency
  // (8b/10b to Gen2, 128b/130b Gen3-5, FLIT 242/256 for Gen6).
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.984615, 1.969231, 3.938462, 7.5625};
  if (gen < 1 || gen > 6 || width < 1) return 0;
  return kLane[gen] * width;
}

namespace {

int nvlinks_between(const PciDevice& a, const PciDevice& b, bool* via_switch) {
  int direct = 0, switched_a = 0, switched_b = 0;
  for (const auto& l : a.nvlinks) {
    if (!l.active) continue;
    if (l.remote_is_switch)
      ++switched_a;
    else if (l.remote_bus_id == b.bus_id)
      ++direct;
  }
  for (const auto& l : b.nvlinks) switched_b += l.active && l.remote_is_switch;
  *via_switch = direct == 0 && switched_a > 0 && switched_b > 0;
  return *via_switch ? switched_a : direct;
}

int bridges_below(const PciDevice& d, size_t from) {
  int n = 0;
  for (size_t i = from; i < d.path_kind.size(); ++i) n += d.path_kind[i] != 'c';
  return n;
}

}  // namespace

std::string relation(const Topology&, const PciDevice& a, const PciDevice& b) {
  if (&a == &b || (!a.bus_id.empty() && a.bus_id == b.bus_id)) return "X";
  bool via_switch = false;
  if (int n = nvlinks_between(a, b, &via_switch); n > 0) return "NV" + std::to_string(n);
  size_t common = 0;
  while (common < a.path.size() && common < b.path.size() && a.path[common] == b.path[common])
    ++common;
  if (common == 0) return "SYS";
  const char lca = a.path_kind[common - 1];
  if (lca == 'b')
    return bridges_below(a, common) <= 1 && bridges_below(b, common) <= 1 ? "PIX" : "PXB";
  if (lca == 'h') return "PHB";
  return a.numa >= 0 && a.numa == b.numa ? "NODE" : "SYS";
}

}  // namespace stallscope::topo
