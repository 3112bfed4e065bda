// A fake NVML for the topology tests, loaded through STALLSCOPE_NVML_LIB:
// the four GPUs of two_socket_4gpu.xml, each with a Gen5 x16 maximum link,
// the UUID "GPU-00000000-0000-0000-0000-00000000000<index>" and four NVLink
// links. By default links 0-1 join the GPUs of one switch
// (0-1, 2-3) and links 2-3 are down; FAKE_NVML_NVSWITCH=1 makes all four
// links active towards NVSwitches instead.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvml_api.hpp"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr unsigned kBuses[] = {0x12, 0x13, 0x92, 0x93};
constexpr unsigned kLinks = 4;
bool g_init = false;

unsigned index_of(nvmlDevice_t d) {
  return static_cast<unsigned>(reinterpret_cast<uintptr_t>(d)) - 1;
}
bool nvswitch() {
  const char* v = std::getenv("FAKE_NVML_NVSWITCH");
  return v && *v == '1';
}

void fill_pci(unsigned bus, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  p->bus = bus;
  p->pciDeviceId = 0x233010de;
  std::snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", bus);
  std::snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", bus);
}

}  // namespace

FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  g_init = true;
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlShutdown(void) {
  g_init = false;
  return 0;
}
FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t) { return "fake error"; }
FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned n) {
  std::snprintf(v, n, "999.99-fake");
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* c) {
  if (!g_init) return 1;  // NVML_ERROR_UNINITIALIZED
  *c = 4;
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= 4) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *d = reinterpret_cast<nvmlDevice_t>(uintptr_t{i} + 1);
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned n) {
  std::snprintf(name, n, "NVIDIA H100 80GB HBM3");
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned n) {
  if (n < 41) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::snprintf(uuid, n, "GPU-00000000-0000-0000-0000-%012x", index_of(d));
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  fill_pci(kBuses[index_of(d)], p);
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t, unsigned* g) {
  *g = 5;
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t, unsigned* w) {
  *w = 16;
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t, unsigned link,
                                                  nvmlEnableState_t* s) {
  if (link >= kLinks) return 2;
  *s = nvswitch() || link < 2 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link,
                                                             nvmlPciInfo_t* p) {
  if (link >= kLinks) return 2;
  if (nvswitch())
    fill_pci(0xc0 + link, p);
  else
    fill_pci(kBuses[index_of(d) ^ 1u], p);
  return 0;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t, unsigned link,
                                                             nvmlIntNvLinkDeviceType_t* t) {
  if (link >= kLinks) return 2;
  *t = nvswitch() ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
  return 0;
}
