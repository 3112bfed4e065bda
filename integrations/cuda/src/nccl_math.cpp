// NCCL byte and bandwidth arithmetic (see nccl_math.hpp).
#include "nccl_math.hpp"

#include <stallscope/nccl_bus.hpp>

namespace stallscope::cuda {
namespace {

struct TypeInfo {
  std::string_view name;
  uint32_t bytes;
};
// Indexed by ncclDataType_t (nccl.h: ncclInt8 = 0 … ncclFloat8e5m2 = 11).
constexpr TypeInfo kTypes[] = {
    {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclInt32", 4},      {"ncclUint32", 4},
    {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat16", 2},    {"ncclFloat32", 4},
    {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
};
constexpr int kNumTypes = sizeof kTypes / sizeof kTypes[0];

}  // namespace

int nccl_type_id(std::string_view datatype) noexcept {
  for (int i = 0; i < kNumTypes; ++i)
    if (kTypes[i].name == datatype) return i;
  // Aliases nccl.h defines with the same values.
  if (datatype == "ncclChar") return 0;
  if (datatype == "ncclInt") return 2;
  if (datatype == "ncclHalf") return 6;
  if (datatype == "ncclFloat") return 7;
  if (datatype == "ncclDouble") return 8;
  return -1;
}

uint32_t nccl_type_size(int id) noexcept {
  return id >= 0 && id < kNumTypes ? kTypes[id].bytes : 0;
}

uint32_t nccl_type_size(std::string_view datatype) noexcept {
  return nccl_type_size(nccl_type_id(datatype));
}

namespace {

// SendRecv before Send and ReduceScatter before Reduce, for prefix matches.
struct OpName {
  std::string_view name;
  format::CollOp op;
};
constexpr OpName kOps[] = {{"AllReduce", format::CollOp::kAllReduce},
                           {"AllGather", format::CollOp::kAllGather},
                           {"ReduceScatter", format::CollOp::kReduceScatter},
                           {"Broadcast", format::CollOp::kBroadcast},
                           {"Reduce", format::CollOp::kReduce},
                           {"AllToAll", format::CollOp::kAllToAll},
                           {"SendRecv", format::CollOp::kSend},
                           {"Send", format::CollOp::kSend},
                           {"Recv", format::CollOp::kRecv}};

}  // namespace

format::CollOp nccl_op(std::string_view func) noexcept {
  for (const auto& o : kOps)
    if (o.name == func) return o.op;
  return format::CollOp::kUnknown;
}

format::CollOp nccl_op_prefix(std::string_view text) noexcept {
  for (const auto& o : kOps)
    if (text.substr(0, o.name.size()) == o.name) return o.op;
  return format::CollOp::kUnknown;
}

uint64_t nccl_call_bytes(uint64_t count, uint32_t type_size) noexcept { return count * type_size; }

uint64_t nccl_data_size(format::CollOp op, uint64_t call_bytes, uint32_t nranks) noexcept {
  return nccl::data_size(op, call_bytes, nranks);
}

double nccl_bus_factor(format::CollOp op, uint32_t nranks) noexcept {
  return nccl::bus_factor(op, nranks);
}

NcclBandwidth nccl_bandwidth(format::CollOp op, uint64_t call_bytes, uint32_t nranks,
                             int64_t ns) noexcept {
  NcclBandwidth b;
  if (ns <= 0) return b;
  b.alg_gbps =
      static_cast<double>(nccl_data_size(op, call_bytes, nranks)) / static_cast<double>(ns);
  b.bus_gbps = b.alg_gbps * nccl_bus_factor(op, nranks);
  return b;
}

}  // namespace stallscope::cuda
