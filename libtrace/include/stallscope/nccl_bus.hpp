// The data size and bus-bandwidth factor of an NCCL operation, as nccl-tests
// computes them (its doc/PERFORMANCE.md; restated in docs/gpu.md). Shared by
// the GPU library (integrations/cuda/src/nccl_math.hpp) and the analyzer.
//
//   busbw = S / t * bus_factor(op, n)
//
// A call size past kMaxCallBytes is not a transfer: see plausible_call_bytes.
#pragma once

#include <cstdint>

#include "stallscope/format.hpp"

namespace stallscope::nccl {

// The largest message one rank's call can pass: its buffer lives in one
// GPU's memory (192 GiB on the largest today), so a size past 1 TiB is a
// damaged or hostile trace, not a transfer. Such a size gives no bandwidth
// (it would print as 10^13 GB/s).
inline constexpr uint64_t kMaxCallBytes = uint64_t{1} << 40;

// count × type size, or 0 when that overflows or passes kMaxCallBytes.
inline uint64_t plausible_call_bytes(uint64_t count, uint64_t type_size) noexcept {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, type_size, &bytes) || bytes > kMaxCallBytes) return 0;
  return bytes;
}

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
