// hwloc -> Topology: CPUs, NUMA nodes, and the PCI devices that matter for
// training (GPUs, NICs, storage) with their NUMA node and PCI path.
#include <hwloc.h>
#include <unistd.h>

#include <memory>

#include "stallscope/topo/topology.hpp"
#include "topo_internal.hpp"

namespace stallscope::topo {
namespace {

struct TopoDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopoPtr = std::unique_ptr<hwloc_topology, TopoDeleter>;

std::string bitmap_list(hwloc_const_bitmap_t b) {
  if (b == nullptr) return {};
  char* s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0 || s == nullptr) return {};
  std::string out(s);
  free(s);
  return out;
}

DeviceKind classify(const hwloc_obj* pci) {
  const unsigned cls = pci->attr->pcidev.class_id;
  const unsigned base = cls >> 8;
  if (pci->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302))
    return DeviceKind::kGpu;
  if (base == 0x02) return DeviceKind::kNic;      // network (0x0200 Ethernet, 0x0207 InfiniBand)
  if (base == 0x01) return DeviceKind::kStorage;  // mass storage (NVMe 0x0108, SATA, RAID)
  for (hwloc_obj* c = pci->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
        c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
      return DeviceKind::kNic;
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_BLOCK) return DeviceKind::kStorage;
  }
  return DeviceKind::kOther;
}

std::string info(const hwloc_obj* o, const char* key) {
  const char* v = hwloc_obj_get_info_by_name(const_cast<hwloc_obj*>(o), key);
  return v ? v : "";
}

void fill_path(const hwloc_obj* pci, PciDevice& d) {
  for (const hwloc_obj* o = pci->parent; o != nullptr; o = o->parent) {
    char kind = 'c';
    if (o->type == HWLOC_OBJ_BRIDGE)
      kind = o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? 'h' : 'b';
    d.path.insert(d.path.begin(), o->gp_index);
    d.path_kind.insert(d.path_kind.begin(), kind);
  }
}

int numa_of(hwloc_topology_t topo, const hwloc_obj* anc) {
  int found = -1, n = 0;
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr)
    if (anc->nodeset && hwloc_bitmap_isset(anc->nodeset, node->os_index))
      found = static_cast<int>(node->os_index), ++n;
  return n == 1 ? found : -1;
}

PciDevice device_of(hwloc_topology_t topo, hwloc_obj* pci, DeviceKind kind) {
  PciDevice d;
  d.kind = kind;
  const auto& a = pci->attr->pcidev;
  d.bus_id = format_bus_id(a.domain, a.bus, a.dev, a.func);
  d.class_id = a.class_id;
  d.vendor_id = a.vendor_id;
  d.device_id = a.device_id;
  d.link_gbps = a.linkspeed;
  const std::string vendor = info(pci, "PCIVendor"), model = info(pci, "PCIDevice");
  d.name = vendor.empty() ? model : model.empty() ? vendor : vendor + " " + model;
  for (hwloc_obj* c = pci->io_first_child; c != nullptr; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) d.os_names.emplace_back(c->name);
  const hwloc_obj* anc = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (anc != nullptr) {
    d.numa = numa_of(topo, anc);
    d.cpus = bitmap_list(anc->cpuset);
  }
  fill_path(pci, d);
  return d;
}

Topology extract(hwloc_topology_t topo) {
  Topology t;
  t.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  t.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  t.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  hwloc_obj_t o = nullptr;
  while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) != nullptr)
    t.numa.push_back(
        {static_cast<int>(o->os_index), o->attr->numanode.local_memory, bitmap_list(o->cpuset)});
  while ((o = hwloc_get_next_pcidev(topo, o)) != nullptr) {
    const DeviceKind k = classify(o);
    if (k != DeviceKind::kOther) t.devices.push_back(device_of(topo, o, k));
  }
  // OS block devices hwloc found without a PCI parent (virtio, NVMe behind
  // a VMD) still count as storage.
  while ((o = hwloc_get_next_osdev(topo, o)) != nullptr) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_BLOCK || o->name == nullptr) continue;
    if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) continue;
    PciDevice d;
    d.kind = DeviceKind::kStorage;
    d.os_names.emplace_back(o->name);
    d.name = info(o, "Model");
    if (const hwloc_obj* anc = hwloc_get_non_io_ancestor_obj(topo, o)) {
      d.numa = numa_of(topo, anc);
      d.cpus = bitmap_list(anc->cpuset);
    }
    t.devices.push_back(std::move(d));
  }
  const hwloc_obj* root = hwloc_get_root_obj(topo);
  t.hostname = info(root, "HostName");
  return t;
}

TopoPtr make_topology(std::string* error) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    *error = "hwloc_topology_init failed";
    return nullptr;
  }
  TopoPtr t(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  return t;
}

}  // namespace

std::optional<Topology> parse_hwloc_xml(std::string_view xml, std::string_view origin,
                                        std::string* error) {
  TopoPtr t = make_topology(error);
  if (!t) return std::nullopt;
  const std::string buf(xml);  // hwloc wants the terminating NUL counted
  if (hwloc_topology_set_xmlbuffer(t.get(), buf.c_str(), static_cast<int>(buf.size() + 1)) != 0 ||
      hwloc_topology_load(t.get()) != 0) {
    *error = std::string(origin) + ": not a valid hwloc XML topology";
    return std::nullopt;
  }
  return extract(t.get());
}

std::optional<Topology> discover(std::string* error, std::string* xml) {
  TopoPtr t = make_topology(error);
  if (!t) return std::nullopt;
  if (hwloc_topology_load(t.get()) != 0) {
    *error = "hwloc could not read this machine's topology";
    return std::nullopt;
  }
  if (xml != nullptr) {
    char* b = nullptr;
    int len = 0;
    if (hwloc_topology_export_xmlbuffer(t.get(), &b, &len, 0) == 0 && b != nullptr) {
      xml->assign(b, len > 0 ? static_cast<size_t>(len - 1) : 0);
      hwloc_free_xmlbuffer(t.get(), b);
    }
  }
  Topology topo = extract(t.get());
  if (topo.hostname.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) topo.hostname = host;
  }
  add_nvml(topo);
  return topo;
}

std::vector<const PciDevice*> Topology::of_kind(DeviceKind k) const {
  std::vector<const PciDevice*> out;
  for (const auto& d : devices)
    if (d.kind == k) out.push_back(&d);
  return out;
}

}  // namespace stallscope::topo
