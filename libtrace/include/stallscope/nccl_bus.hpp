// The data size and bus-bandwidth factor of an NCCL operation, as nccl-tests
// computes them (its doc/PERFORMANCE.md; restated in docs/gpu.md). Shared by
// the GPU library (integrations/cuda/src/nccl_math.hpp) and the analyzer.
//
//   busbw = S / t * bus_factor(op, n)
#pragma once

#include <cstdint>

#include "stallscope/format.hpp"

namespace stallscope::nccl {

// S: count * type size for all_reduce, broadcast, reduce, send, recv;
// count * type size * n for all_gather (count = sendcount) and
// reduce_scatter (count = recvcount), whose buffers hold every rank's part.
inline uint64_t data_size(format::CollOp op, uint64_t call_bytes, uint32_t nranks) noexcept {
  if (op == format::CollOp::kAllGather || op == format::CollOp::kReduceScatter)
    return call_bytes * (nranks == 0 ? 1 : nranks);
  return call_bytes;
}

// busbw / algbw: 2(n-1)/n for all_reduce; (n-1)/n for all_gather,
// reduce_scatter, all_to_all; 1 for broadcast, reduce, send, recv.
inline double bus_factor(format::CollOp op, uint32_t nranks) noexcept {
  const double n = nranks == 0 ? 1.0 : static_cast<double>(nranks);
  switch (op) {
    case format::CollOp::kAllReduce: return 2.0 * (n - 1.0) / n;
    case format::CollOp::kAllGather:
    case format::CollOp::kReduceScatter:
    case format::CollOp::kAllToAll: return (n - 1.0) / n;
    default: return 1.0;
  }
}

}  // namespace stallscope::nccl
