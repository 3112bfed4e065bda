// The "topology" attachment: Topology <-> JSON.
#include <nlohmann/json.hpp>

#include "stallscope/internal/bounded_json.hpp"
#include "stallscope/topo/topology.hpp"

namespace stallscope::topo {
namespace {

using nlohmann::json;
constexpr const char* kKinds[] = {"gpu", "nic", "storage", "other"};

json device_json(const PciDevice& d) {
  json links = json::array();
  for (const auto& l : d.nvlinks)
    links.push_back({{"link", l.link},
                     {"active", l.active},
                     {"remote", l.remote_bus_id},
                     {"remote_is_switch", l.remote_is_switch}});
  return {{"kind", kKinds[static_cast<int>(d.kind)]},
          {"bus_id", d.bus_id},
          {"name", d.name},
          {"os_names", d.os_names},
          {"numa", d.numa},
          {"cpus", d.cpus},
          {"link_gbps", d.link_gbps},
          {"gpu_index", d.gpu_index},
          {"uuid", d.uuid},
          {"pcie_max_gen", d.pcie_max_gen},
          {"pcie_max_width", d.pcie_max_width},
          {"pcie_max_gbps", pcie_gbps(d.pcie_max_gen, d.pcie_max_width)},
          {"nvlinks", links},
          {"pci_path", d.path},
          {"pci_path_kind", std::string(d.path_kind.begin(), d.path_kind.end())}};
}

PciDevice device_of(const json& j) {
  PciDevice d;
  const std::string kind = j.value("kind", "other");
  for (int k = 0; k < 4; ++k)
    if (kind == kKinds[k]) d.kind = static_cast<DeviceKind>(k);
  d.bus_id = j.value("bus_id", "");
  d.name = j.value("name", "");
  d.os_names = j.value("os_names", std::vector<std::string>{});
  d.numa = j.value("numa", -1);
  d.cpus = j.value("cpus", "");
  d.link_gbps = j.value("link_gbps", 0.0);
  d.gpu_index = j.value("gpu_index", -1);
  d.uuid = j.value("uuid", "");
  d.pcie_max_gen = j.value("pcie_max_gen", 0);
  d.pcie_max_width = j.value("pcie_max_width", 0);
  for (const auto& l : j.value("nvlinks", json::array()))
    d.nvlinks.push_back({l.value("link", 0), l.value("active", false), l.value("remote", ""),
                         l.value("remote_is_switch", false)});
  d.path = j.value("pci_path", std::vector<uint64_t>{});
  const std::string kinds = j.value("pci_path_kind", "");
  d.path_kind.assign(kinds.begin(), kinds.end());
  d.path_kind.resize(d.path.size(), 'c');  // a malformed file never indexes past the end
  return d;
}

}  // namespace

std::string to_json(const Topology& t) {
  json j = {{"host", t.hostname}, {"packages", t.packages}, {"cores", t.cores},
            {"pus", t.pus},       {"nvml", t.nvml},         {"notes", t.notes}};
  j["numa"] = json::array();
  for (const auto& n : t.numa)
    j["numa"].push_back(
        {{"os_index", n.os_index}, {"memory_bytes", n.memory_bytes}, {"cpus", n.cpus}});
  j["devices"] = json::array();
  for (const auto& d : t.devices) j["devices"].push_back(device_json(d));
  return j.dump();
}

std::optional<Topology> from_json(std::string_view text, std::string_view origin,
                                  std::string* error) {
  try {
    // Bounded: the copies below (value()) recurse once per level.
    std::string why;
    const json j = detail::parse_bounded_json(text, &why);
    if (j.is_discarded()) throw std::runtime_error("the document " + why);
    if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array())
      throw std::runtime_error("no \"devices\" array");
    Topology t;
    t.hostname = j.value("host", "");
    t.packages = j.value("packages", 0);
    t.cores = j.value("cores", 0);
    t.pus = j.value("pus", 0);
    t.nvml = j.value("nvml", "");
    t.notes = j.value("notes", std::vector<std::string>{});
    for (const auto& n : j.value("numa", json::array()))
      t.numa.push_back(
          {n.value("os_index", -1), n.value("memory_bytes", uint64_t{0}), n.value("cpus", "")});
    for (const auto& d : j["devices"]) t.devices.push_back(device_of(d));
    return t;
  } catch (const std::exception& e) {
    *error = std::string(origin) + ": not a stallscope topology (" + e.what() + ")";
    return std::nullopt;
  }
}

}  // namespace stallscope::topo
