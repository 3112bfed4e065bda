// The gradient all-reduce of a multi-rank CUDA run through NCCL, loaded
// with dlopen (libnccl.so.2, or STALLSCOPE_TRAINER_NCCL_LIB) so that the
// trainer builds and starts where NCCL is absent. Rank 0 makes the unique
// id and the Comm broadcasts it; every rank then joins one communicator.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "comm.hpp"

namespace trainer {

class NcclAllreduce {
 public:
  virtual ~NcclAllreduce() = default;
  // Queues a sum all-reduce of `floats` float32 values in place on `stream`;
  // 0, or an NCCL result code.
  virtual int enqueue(void* device_buf, size_t floats, cudaStream_t stream) = 0;
  virtual std::string version() const = 0;
};

// A communicator over all of comm's ranks, or nullptr with *why saying why
// (no libnccl, init failed, the Comm cannot broadcast). Collective: every
// rank must call it.
std::unique_ptr<NcclAllreduce> open_nccl_allreduce(Comm& comm, std::string* why);

}  // namespace trainer
