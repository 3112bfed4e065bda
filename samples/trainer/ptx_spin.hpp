// A spin kernel as PTX, JIT-compiled by the driver: the sample trainer's
// CUDA device, the GPU tests and the GPU workload launch real kernels
// without nvcc or a CUDA-language target.
// stallscope_spin(cycles) busy-waits `cycles` SM clocks on one thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace stallscope::test {

inline constexpr char kSpinPtx[] = R"(
.version 7.0
.target sm_52
.address_size 64

.visible .entry stallscope_spin(.param .u64 cycles)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
$L_spin:
  mov.u64 %rd3, %clock64;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $L_spin;
  ret;
}
)";

// Loads the kernel; nullptr when the driver refuses.
inline cudaKernel_t load_spin_kernel() {
  cudaLibrary_t lib = nullptr;
  cudaKernel_t k = nullptr;
  if (cudaLibraryLoadData(&lib, kSpinPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess)
    return nullptr;
  if (cudaLibraryGetKernel(&k, lib, "stallscope_spin") != cudaSuccess) return nullptr;
  return k;
}

// Launches one spin of about `ns` nanoseconds at `clock_khz` on `stream`.
inline cudaError_t launch_spin(cudaKernel_t k, uint64_t ns, int clock_khz, cudaStream_t stream) {
  uint64_t cycles = ns * static_cast<uint64_t>(clock_khz) / 1000000u;
  void* args[] = {&cycles};
  return cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(1), dim3(1), args, 0, stream);
}

inline int sm_clock_khz(int device) {
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess || khz <= 0)
    khz = 1500000;  // CUDA 13 may not report it: a typical boost clock
  return khz;
}

}  // namespace stallscope::test
