// NCCL profiler-plugin events -> stallscope collectives: the state of one
// communicator and the pure conversion of a call's arguments.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include <stallscope/trace.hpp>

namespace stallscope::cuda {

// One communicator as NCCL's init told the plugin.
struct NcclComm {
  uint64_t id = 0;  // commHash / commId: the same on every rank
  uint32_t rank = 0;
  uint32_t nranks = 1;
  std::atomic<uint64_t> next_seq{0};  // calls issued on this communicator
};

// The collective of one call: op and bytes from the function and datatype
// names, communicator facts, and the next per-communicator sequence number.
Collective nccl_collective(NcclComm& comm, std::string_view func, uint64_t count,
                           std::string_view datatype, int peer) noexcept;

}  // namespace stallscope::cuda
