// A program annotated with NVTX3 only (the CUDA toolkit's header-only
// library) and no stallscope header: its ranges must reach the trace when
// the shim is preloaded. A second NVTX copy lives in libnvtx_copy.so.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

extern "C" void nvtx_copy_range();  // libnvtx_copy.so: its own NVTX copy

int main() {
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step");
    nvtxRangePushA("inner");
    nvtxRangePop();
    nvtxRangePop();
  }
  nvtxDomainHandle_t domain = nvtxDomainCreateA("mydomain");
  nvtxStringHandle_t reg = nvtxDomainRegisterStringA(domain, "registered");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = reg;
  nvtxDomainRangePushEx(domain, &a);
  nvtxDomainRangePop(domain);
  nvtxRangeId_t id = nvtxRangeStartA("startend");
  nvtxRangeEnd(id);
  nvtxMarkA("a mark");
  nvtx_copy_range();
  std::puts("NVTX done");
  return 0;
}
