// stallscope topology — the machine a trace was recorded on: CPUs, NUMA
// nodes, the PCI tree with its GPUs, NICs and storage devices (from hwloc),
// and, where an NVIDIA driver is present, what NVML adds (GPU names and
// UUIDs, NVLink links and their state, each GPU's maximum PCIe generation
// and width). Captured at record time and stored in the trace as the
// attachment "topology" (JSON, with the hwloc XML beside it as
// "topology.hwloc.xml"), since reports are often made on another machine.
//
//   std::string err;
//   auto t = stallscope::topo::discover(&err);       // this machine
//   if (t) std::cout << stallscope::topo::format_matrix(*t);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::topo {

struct NumaNode {
  int os_index = -1;
  uint64_t memory_bytes = 0;
  std::string cpus;  // CPU list, "0-7,16-23"
};

enum class DeviceKind : uint8_t { kGpu, kNic, kStorage, kOther };

struct NvLink {
  int link = 0;
  bool active = false;
  std::string remote_bus_id;  // a GPU's or an NVSwitch's PCI bus id
  bool remote_is_switch = false;
};

struct PciDevice {
  DeviceKind kind = DeviceKind::kOther;
  std::string bus_id;                 // "0000:17:00.0"
  std::string name;                   // vendor + device name, or NVML's GPU name
  std::vector<std::string> os_names;  // "mlx5_0", "ib0", "nvme0n1"
  uint16_t class_id = 0, vendor_id = 0, device_id = 0;
  double link_gbps = 0;  // current PCIe link bandwidth per direction (hwloc), 0 unknown
  int numa = -1;         // local NUMA node (os index), -1 unknown
  std::string cpus;      // local CPUs
  // GPUs, from NVML where present:
  int gpu_index = -1;
  std::string uuid;  // NVML's "GPU-" and 8-4-4-4-12 hex digits, empty unknown
  int pcie_max_gen = 0, pcie_max_width = 0;
  std::vector<NvLink> nvlinks;
  // Path from the machine root down: the objects' hwloc gp indexes and
  // their kinds ("host", "bridge", "cpu" for non-I/O), for affinity.
  std::vector<uint64_t> path;
  std::vector<char> path_kind;  // 'c' cpu-side object, 'h' host bridge, 'b' PCI bridge
};

struct Topology {
  std::string hostname;
  int packages = 0, cores = 0, pus = 0;
  std::vector<NumaNode> numa;
  std::vector<PciDevice> devices;  // GPUs, NICs and storage (others dropped)
  std::string nvml;                // "ok (driver 570.86)", or why NVML is absent
  std::vector<std::string> notes;

  std::vector<const PciDevice*> of_kind(DeviceKind k) const;
};

// Parses hwloc XML (as hwloc_topology_export_xml writes it). On failure
// returns nullopt and sets *error naming `origin` (a file name).
std::optional<Topology> parse_hwloc_xml(std::string_view xml, std::string_view origin,
                                        std::string* error);

// This machine through hwloc, with PCI and OS devices; *xml receives the
// hwloc XML (may be null). Adds NVML facts when a driver is present.
std::optional<Topology> discover(std::string* error, std::string* xml = nullptr);

// Adds NVML facts (GPU names and UUIDs, NVLink, max PCIe) to the GPUs of `t`:
// loads STALLSCOPE_NVML_LIB or libnvidia-ml.so.1. Sets t.nvml either way.
void add_nvml(Topology& t);

// nvidia-smi-style relation of two devices: "X" (same), "NV<n>" (n NVLink
// links), "PIX" (at most one PCIe bridge each), "PXB" (several bridges, no
// host bridge), "PHB" (through a host bridge), "NODE" (between host bridges
// of one NUMA node), "SYS" (across NUMA nodes).
std::string relation(const Topology& t, const PciDevice& a, const PciDevice& b);

// PCIe bandwidth per direction in GB/s of a link: generation 1..6, width.
double pcie_gbps(int gen, int width);

// The `stallscope topo` text: devices, the GPU/NIC matrix with a legend,
// NUMA affinity and link bandwidths.
std::string format_text(const Topology& t);
// The JSON stored as the "topology" attachment, and back (a topology
// recorded on another machine). from_json sets *error naming `origin` when
// the text is no topology.
std::string to_json(const Topology& t);
std::optional<Topology> from_json(std::string_view text, std::string_view origin,
                                  std::string* error);

}  // namespace stallscope::topo
