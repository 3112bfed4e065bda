// `stallscope topo --probe`: host<->device bandwidth through the CUDA
// runtime, loaded with dlopen so the command runs where CUDA is absent.
#include "cmd_topo_probe.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace stallscope::cli {
namespace {

// The few runtime prototypes used (cuda_runtime_api.h); cudaError_t is an int.
struct Cudart {
  int (*device_count)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*malloc_dev)(void**, size_t) = nullptr;
  int (*free_dev)(void*) = nullptr;
  int (*malloc_host)(void**, size_t) = nullptr;
  int (*free_host)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*memcpy_peer)(void*, int, const void*, int, size_t) = nullptr;
  int (*can_peer)(int*, int, int) = nullptr;
  int (*enable_peer)(int, unsigned) = nullptr;
  int (*sync)() = nullptr;
  int (*bus_id)(char*, int, int) = nullptr;
  const char* (*error)(int) = nullptr;
};
constexpr int kH2D = 1, kD2H = 2;  // cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost

template <typename F>
bool bind(void* h, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(h, name));
  return *f != nullptr;
}

// Loads the runtime; on failure says why in *why.
bool load(Cudart& c, std::string* why) {
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* e = dlerror();
    *why = e ? e : "libcuda.so.1 not found";
    return false;
  }
  void* h = nullptr;
  const char* env = std::getenv("STALLSCOPE_CUDART_LIB");
  for (const char* n : {env, "libcudart.so.13", "libcudart.so.12", "libcudart.so",
                        "/usr/local/cuda/lib64/libcudart.so"})
    if (n && *n && (h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  if (h == nullptr) {
    *why = "libcudart not found (set STALLSCOPE_CUDART_LIB)";
    return false;
  }
  if (!(bind(h, "cudaGetDeviceCount", &c.device_count) && bind(h, "cudaSetDevice", &c.set_device) &&
        bind(h, "cudaMalloc", &c.malloc_dev) && bind(h, "cudaFree", &c.free_dev) &&
        bind(h, "cudaMallocHost", &c.malloc_host) && bind(h, "cudaFreeHost", &c.free_host) &&
        bind(h, "cudaMemcpy", &c.memcpy) && bind(h, "cudaMemcpyPeer", &c.memcpy_peer) &&
        bind(h, "cudaDeviceCanAccessPeer", &c.can_peer) &&
        bind(h, "cudaDeviceEnablePeerAccess", &c.enable_peer) &&
        bind(h, "cudaDeviceSynchronize", &c.sync) && bind(h, "cudaDeviceGetPCIBusId", &c.bus_id) &&
        bind(h, "cudaGetErrorString", &c.error))) {
    *why = "libcudart lacks a function the probe needs";
    return false;
  }
  return true;
}

// Best GB/s of `reps` runs of `copy` moving `bytes` each (after a warm-up).
template <typename F>
double best_gbps(const Cudart& c, uint64_t bytes, F copy) {
  copy();
  c.sync();
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (copy() != 0) return 0;
    c.sync();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0 && bytes / s / 1e9 > best) best = bytes / s / 1e9;
  }
  return best;
}

const topo::PciDevice* gpu_by_bus(const topo::Topology& t, const char* bus) {
  std::string b(bus);
  for (auto& ch : b) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (b.size() > 12) b = b.substr(b.size() - 12);  // "00000000:17:00.0" -> "0000:17:00.0"
  for (const auto& d : t.devices)
    if (d.kind == topo::DeviceKind::kGpu && d.bus_id == b) return &d;
  return nullptr;
}

void line(std::ostream& out, int dev, const char* what, double gbps, double link) {
  char b[160];
  if (link > 0)
    std::snprintf(b, sizeof b, "GPU%d %-14s %7.1f GB/s  (%3.0f%% of the link's %.1f GB/s)\n", dev,
                  what, gbps, 100 * gbps / link, link);
  else
    std::snprintf(b, sizeof b, "GPU%d %-14s %7.1f GB/s\n", dev, what, gbps);
  out << b;
}

void probe_gpu(const Cudart& c, const topo::Topology& t, int dev, uint64_t bytes,
               std::ostream& out) {
  c.set_device(dev);
  char bus[32] = {};
  c.bus_id(bus, sizeof bus, dev);
  const topo::PciDevice* g = gpu_by_bus(t, bus);
  const double link = g ? topo::pcie_gbps(g->pcie_max_gen, g->pcie_max_width) : 0;
  void *d = nullptr, *pinned = nullptr;
  void* pageable = std::malloc(bytes);
  if (c.malloc_dev(&d, bytes) != 0 || c.malloc_host(&pinned, bytes) != 0 || !pageable) {
    out << "GPU" << dev << ": cannot allocate " << (bytes >> 20) << " MiB for the probe\n";
  } else {
    std::memset(pageable, 1, bytes);
    line(out, dev, "H2D pinned",
         best_gbps(c, bytes, [&] { return c.memcpy(d, pinned, bytes, kH2D); }), link);
    line(out, dev, "D2H pinned",
         best_gbps(c, bytes, [&] { return c.memcpy(pinned, d, bytes, kD2H); }), link);
    line(out, dev, "H2D pageable",
         best_gbps(c, bytes, [&] { return c.memcpy(d, pageable, bytes, kH2D); }), link);
    line(out, dev, "D2H pageable",
         best_gbps(c, bytes, [&] { return c.memcpy(pageable, d, bytes, kD2H); }), link);
  }
  if (d) c.free_dev(d);
  if (pinned) c.free_host(pinned);
  std::free(pageable);
}

void probe_p2p(const Cudart& c, int a, int b, uint64_t bytes, std::ostream& out) {
  int ok = 0;
  if (c.can_peer(&ok, a, b) != 0 || !ok) {
    out << "GPU" << a << "->GPU" << b << " P2P: not possible (copies stage through the host)\n";
    return;
  }
  void *src = nullptr, *dst = nullptr;
  c.set_device(a);
  c.enable_peer(b, 0);
  c.malloc_dev(&src, bytes);
  c.set_device(b);
  c.malloc_dev(&dst, bytes);
  if (src && dst) {
    char text[96];
    std::snprintf(text, sizeof text, "GPU%d->GPU%d P2P %7.1f GB/s\n", a, b,
                  best_gbps(c, bytes, [&] { return c.memcpy_peer(dst, b, src, a, bytes); }));
    out << text;
  }
  if (src) c.free_dev(src);
  if (dst) c.free_dev(dst);
}

}  // namespace

int run_bandwidth_probe(const topo::Topology& t, uint64_t bytes, std::ostream& out) {
  Cudart c;
  std::string why;
  if (!load(c, &why)) {
    out << "no CUDA driver: bandwidth probe not run (" << why << ")\n";
    return -ENODEV;
  }
  int n = 0;
  if (const int rc = c.device_count(&n); rc != 0 || n == 0) {
    out << "no CUDA driver: bandwidth probe not run (cudaGetDeviceCount: "
        << (rc ? c.error(rc) : "no device") << ")\n";
    return -ENODEV;
  }
  out << "Bandwidth probe, " << (bytes >> 20) << " MiB per copy, best of 3:\n";
  for (int d = 0; d < n; ++d) probe_gpu(c, t, d, bytes, out);
  for (int a = 0; a + 1 < n; ++a) probe_p2p(c, a, a + 1, bytes, out);
  return 0;
}

}  // namespace stallscope::cli
