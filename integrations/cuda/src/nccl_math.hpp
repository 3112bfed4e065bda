// NCCL byte and bandwidth arithmetic, with the formulas nccl-tests prints
// (its doc/PERFORMANCE.md; restated in docs/gpu.md):
//
//   algbw = S / t, S the operation's data size (below)
//   busbw = algbw * factor(op, n):
//     all_reduce 2(n-1)/n;  all_gather, reduce_scatter, all_to_all (n-1)/n;
//     broadcast, reduce, send, recv 1
//
// S follows nccl-tests: count * type size for all_reduce, broadcast, reduce,
// send, recv; count * type size * n for all_gather (count = sendcount) and
// reduce_scatter (count = recvcount), whose buffers hold every rank's part.
#pragma once

#include <cstdint>
#include <string_view>

#include <stallscope/format.hpp>

namespace stallscope::cuda {

// Bytes of one element of an NCCL datatype, by its name as the profiler
// plugin passes it ("ncclFloat32", …) or its ncclDataType_t value; 0 when
// unknown.
uint32_t nccl_type_size(std::string_view datatype) noexcept;
uint32_t nccl_type_size(int nccl_data_type) noexcept;
// The ncclDataType_t value of a datatype name; -1 when unknown.
int nccl_type_id(std::string_view datatype) noexcept;

// The op of an NCCL function name as the plugin passes it ("AllReduce", …).
format::CollOp nccl_op(std::string_view func) noexcept;
// The operation whose name starts text ("AllReduce_Sum_f32…" of a kernel name).
format::CollOp nccl_op_prefix(std::string_view text) noexcept;

// Bytes of the user's buffer a call with `count` elements moves (count *
// type size): what the trace records per collective.
uint64_t nccl_call_bytes(uint64_t count, uint32_t type_size) noexcept;

// S of the nccl-tests formulas for one call (see above).
uint64_t nccl_data_size(format::CollOp op, uint64_t call_bytes, uint32_t nranks) noexcept;

// busbw / algbw for `op` over `nranks` ranks (1 for one rank of a reduction:
// nothing crosses a link, so callers show no bus bandwidth then).
double nccl_bus_factor(format::CollOp op, uint32_t nranks) noexcept;

struct NcclBandwidth {
  double alg_gbps = 0;  // GB/s, 1e9 bytes
  double bus_gbps = 0;
};
// Bandwidths of one call that took `ns` nanoseconds; zeros when ns <= 0.
NcclBandwidth nccl_bandwidth(format::CollOp op, uint64_t call_bytes, uint32_t nranks,
                             int64_t ns) noexcept;

}  // namespace stallscope::cuda
