// The C ABI of libstallscope_cuda.so over the GPU source registry.
#include <cerrno>
#include <mutex>

#include "gpu_source.hpp"
#include "stallscope/cuda/cuda_attach.h"
#include "stallscope/trace.h"
#ifdef STALLSCOPE_CUDA_HAVE_TOPO
#include "stallscope/topo/capture.hpp"
#endif

namespace stallscope::cuda {

std::span<GpuSource* const> gpu_sources() noexcept {
  static GpuSource* const kSources[] = {&cupti_source()};
  return kSources;
}

}  // namespace stallscope::cuda

namespace sc = stallscope::cuda;

extern "C" int stallscope_cuda_attach_v1(void) {
  static std::once_flag once;
  static int result = -EAGAIN;
  std::call_once(once, [] {
    result = -ENODEV;
    for (sc::GpuSource* s : sc::gpu_sources()) {
      const int rc = s->attach();
      if (rc == 0 || result == -ENODEV) result = rc;
    }
    // Capture switches (stallscope_capture_set, the control file, `stallscope
    // ctl`) reach the GPU sources: "off" flushes CUPTI while capture is on.
    if (result == 0) stallscope_capture_hook_add(&stallscope_cuda_capture_v1);
    // Step markers tag the CUDA calls each step makes (external correlation).
    if (result == 0) stallscope_step_hook_add(&stallscope_cuda_step_v1);
#ifdef STALLSCOPE_CUDA_HAVE_TOPO
    // The machine's topology, once per host and run: the first process to
    // initialize CUDA pays the hwloc scan (milliseconds), the others nothing.
    stallscope::topo::capture_topology();
#endif
  });
  return result;
}

extern "C" int stallscope_cuda_flush_v1(void) {
  int rc = 0;
  for (sc::GpuSource* s : sc::gpu_sources())
    if (int r = s->flush(); r < 0) rc = r;
  return rc;
}

extern "C" void stallscope_cuda_capture_v1(int on) {
  for (sc::GpuSource* s : sc::gpu_sources()) s->set_capture(on != 0);
}

extern "C" void stallscope_cuda_step_v1(uint64_t index, int begin) {
  for (sc::GpuSource* s : sc::gpu_sources()) s->on_step(index, begin != 0);
}

extern "C" int stallscope_cuda_cupti_request_v1(const char* api, const char* who) {
  bool forward = true;
  for (sc::GpuSource* s : sc::gpu_sources())
    forward = s->hand_over(api ? api : "?", who ? who : "another library") && forward;
  return forward ? 1 : 0;
}
