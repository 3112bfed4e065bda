// A small GPU trainer for scripts/gpu-check.sh: steps of real device work
// with stallscope step marks, in three shapes.
//
//   gpu_workload compute        20 ms kernel + 4 MiB pinned H2D per step
//   gpu_workload h2d-pageable   512 MiB pageable H2D + 2 ms kernel per step
//   gpu_workload graph-toggle   a CUDA graph replayed 6 times, capture
//                               switched off and on twice around replays
//   options: --steps N (30), --attach DIR/libstallscope_cuda.so (when not
//   started under `stallscope run`, which attaches through the shim)
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trainer/ptx_spin.hpp"  // samples/trainer
#include "stallscope/trace.h"

namespace {

using stallscope::test::launch_spin;

#define CHECK(call)                                                                         \
  do {                                                                                      \
    const cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "gpu_workload: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

void* cuda_lib() { return dlopen("libstallscope_cuda.so", RTLD_NOW | RTLD_NOLOAD); }

// Capture switched the way a trainer (or the control file) does: the GPU
// library hears of it through its capture hook and flushes CUPTI first.
void gpu_capture(int on) { stallscope_capture_set(on); }

void flush_gpu() {
  if (void* lib = cuda_lib())
    if (auto f = reinterpret_cast<int (*)()>(dlsym(lib, "stallscope_cuda_flush_v1"))) f();
}

void steps(int n, size_t copy_bytes, bool pinned, uint64_t kernel_ns) {
  cudaKernel_t spin = stallscope::test::load_spin_kernel();
  if (spin == nullptr) std::fprintf(stderr, "gpu_workload: PTX kernel refused\n"), std::exit(1);
  const int khz = stallscope::test::sm_clock_khz(0);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  void* dev = nullptr;
  void* host = nullptr;
  CHECK(cudaMalloc(&dev, copy_bytes));
  if (pinned)
    CHECK(cudaMallocHost(&host, copy_bytes));
  else
    host = std::malloc(copy_bytes), std::memset(host, 1, copy_bytes);
  for (int i = 0; i < n; ++i) {
    stallscope_step_begin(static_cast<uint64_t>(i));
    CHECK(cudaMemcpyAsync(dev, host, copy_bytes, cudaMemcpyHostToDevice, s));
    CHECK(launch_spin(spin, kernel_ns, khz, s));
    CHECK(cudaStreamSynchronize(s));
    stallscope_step_end(static_cast<uint64_t>(i));
  }
  flush_gpu();
  std::printf("gpu_workload: %d steps done\n", n);
}

void graph_toggle() {
  cudaKernel_t spin = stallscope::test::load_spin_kernel();
  const int khz = stallscope::test::sm_clock_khz(0);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < 4; ++k) CHECK(launch_spin(spin, 1'000'000, khz, s));
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  const int toggles[] = {1, 0, 1, 0, 1, 1};  // capture state before each replay
  for (int i = 0; i < 6; ++i) {
    gpu_capture(toggles[i]);
    stallscope_step_begin(static_cast<uint64_t>(i));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    stallscope_step_end(static_cast<uint64_t>(i));
  }
  flush_gpu();
  std::printf("gpu_workload: graph replayed 6 times, capture toggled off/on twice: ok\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: gpu_workload compute|h2d-pageable|graph-toggle "
                 "[--steps N] [--attach LIB]\n");
    return 2;
  }
  const std::string mode = argv[1];
  int n = 30;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) n = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--attach") == 0) {
      void* lib = dlopen(argv[i + 1], RTLD_NOW | RTLD_GLOBAL);
      auto attach =
          lib ? reinterpret_cast<int (*)()>(dlsym(lib, "stallscope_cuda_attach_v1")) : nullptr;
      std::printf("gpu_workload: attach %s\n", attach && attach() == 0 ? "ok" : "failed");
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA driver: gpu_workload needs a GPU\n");
    return 77;
  }
  if (mode == "compute")
    steps(n, 4u << 20, true, 20'000'000);
  else if (mode == "h2d-pageable")
    steps(n, 512u << 20, false, 2'000'000);
  else if (mode == "graph-toggle")
    graph_toggle();
  else
    return std::fprintf(stderr, "gpu_workload: unknown mode %s\n", mode.c_str()), 2;
  return 0;
}
