// NVML facts for the GPUs hwloc found, through dlopen: no link-time
// dependency, so the topology works on machines without a driver.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "nvml_api.hpp"
#include "stallscope/topo/topology.hpp"
#include "topo_internal.hpp"

namespace stallscope::topo {
namespace {

struct Nvml {
  void* handle = nullptr;
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlSystemGetDriverVersion) driver_version = nullptr;
  decltype(&nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) by_index = nullptr;
  decltype(&nvmlDeviceGetName) name = nullptr;
  decltype(&nvmlDeviceGetUUID) uuid = nullptr;  // optional
  decltype(&nvmlDeviceGetPciInfo_v3) pci = nullptr;
  decltype(&nvmlDeviceGetMaxPcieLinkGeneration) max_gen = nullptr;
  decltype(&nvmlDeviceGetMaxPcieLinkWidth) max_width = nullptr;
  decltype(&nvmlDeviceGetNvLinkState) link_state = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2) link_remote = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemoteDeviceType) link_type = nullptr;  // optional
};

template <typename F>
bool bind(void* h, const char* sym, F* f) {
  *f = reinterpret_cast<F>(dlsym(h, sym));
  return *f != nullptr;
}

// Loads NVML; returns why not in *why.
bool load(Nvml& n, std::string* why) {
  const char* env = std::getenv("STALLSCOPE_NVML_LIB");
  const char* path = env && *env ? env : "libnvidia-ml.so.1";
  n.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (n.handle == nullptr) {
    const char* e = dlerror();
    *why = std::string("no NVIDIA driver (") + (e ? e : path) + ")";
    return false;
  }
  void* h = n.handle;
  bind(h, "nvmlDeviceGetNvLinkRemoteDeviceType", &n.link_type);
  bind(h, "nvmlSystemGetDriverVersion", &n.driver_version);
  bind(h, "nvmlDeviceGetUUID", &n.uuid);
  if (!(bind(h, "nvmlInit_v2", &n.init) && bind(h, "nvmlShutdown", &n.shutdown) &&
        bind(h, "nvmlErrorString", &n.error_string) && bind(h, "nvmlDeviceGetCount_v2", &n.count) &&
        bind(h, "nvmlDeviceGetHandleByIndex_v2", &n.by_index) &&
        bind(h, "nvmlDeviceGetName", &n.name) && bind(h, "nvmlDeviceGetPciInfo_v3", &n.pci) &&
        bind(h, "nvmlDeviceGetMaxPcieLinkGeneration", &n.max_gen) &&
        bind(h, "nvmlDeviceGetMaxPcieLinkWidth", &n.max_width) &&
        bind(h, "nvmlDeviceGetNvLinkState", &n.link_state) &&
        bind(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.link_remote))) {
    *why = std::string(path) + " lacks an NVML function stallscope needs";
    return false;
  }
  return true;
}

void read_links(const Nvml& n, nvmlDevice_t dev, PciDevice& gpu) {
  for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
    nvmlEnableState_t state = NVML_FEATURE_DISABLED;
    if (n.link_state(dev, l, &state) != kNvmlSuccess) continue;  // no such link
    NvLink link;
    link.link = static_cast<int>(l);
    link.active = state == NVML_FEATURE_ENABLED;
    nvmlPciInfo_t remote{};
    if (link.active && n.link_remote(dev, l, &remote) == kNvmlSuccess)
      link.remote_bus_id = normalize_bus_id(remote.busId);
    nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    if (link.active && n.link_type && n.link_type(dev, l, &type) == kNvmlSuccess)
      link.remote_is_switch = type == NVML_NVLINK_DEVICE_TYPE_SWITCH;
    gpu.nvlinks.push_back(link);
  }
}

PciDevice* gpu_with_bus(Topology& t, const std::string& bus) {
  for (auto& d : t.devices)
    if (d.bus_id == bus) return &d;
  t.devices.push_back(PciDevice{});  // a GPU hwloc did not list (container)
  t.devices.back().kind = DeviceKind::kGpu;
  t.devices.back().bus_id = bus;
  return &t.devices.back();
}

void read_gpu(const Nvml& n, unsigned index, Topology& t) {
  nvmlDevice_t dev = nullptr;
  nvmlPciInfo_t pci{};
  if (n.by_index(index, &dev) != kNvmlSuccess || n.pci(dev, &pci) != kNvmlSuccess) {
    t.notes.push_back("NVML: GPU " + std::to_string(index) + " unreadable");
    return;
  }
  PciDevice& gpu = *gpu_with_bus(t, normalize_bus_id(pci.busId));
  gpu.gpu_index = static_cast<int>(index);
  char name[96] = {};
  if (n.name(dev, name, sizeof name) == kNvmlSuccess) gpu.name = name;
  char uuid[kNvmlUuidBufferSize] = {};
  if (n.uuid && n.uuid(dev, uuid, sizeof uuid) == kNvmlSuccess)
    gpu.uuid.assign(uuid, strnlen(uuid, sizeof uuid));  // not trusting the terminator
  unsigned gen = 0, width = 0;
  if (n.max_gen(dev, &gen) == kNvmlSuccess) gpu.pcie_max_gen = static_cast<int>(gen);
  if (n.max_width(dev, &width) == kNvmlSuccess) gpu.pcie_max_width = static_cast<int>(width);
  read_links(n, dev, gpu);
}

}  // namespace

void add_nvml(Topology& t) {
  Nvml n;
  std::string why;
  if (!load(n, &why)) {
    t.nvml = why;
    return;
  }
  if (nvmlReturn_t rc = n.init(); rc != kNvmlSuccess) {
    t.nvml = std::string("nvmlInit failed: ") + n.error_string(rc);
    return;
  }
  unsigned count = 0;
  n.count(&count);
  for (unsigned i = 0; i < count && i < 64; ++i) read_gpu(n, i, t);
  char version[96] = "?";
  if (n.driver_version) n.driver_version(version, sizeof version);
  t.nvml = "ok: " + std::to_string(count) + " GPU(s), driver " + version;
  n.shutdown();
}

}  // namespace stallscope::topo
