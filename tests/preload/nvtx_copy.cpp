// A shared library with its own copy of NVTX3 (as PyTorch and NCCL carry).
#include <nvtx3/nvToolsExt.h>

extern "C" __attribute__((visibility("default"))) void nvtx_copy_range() {
  nvtxRangePushA("from_copy");
  nvtxRangePop();
}
