// NCCL calls -> stallscope collectives (see nccl_events.hpp).
#include "nccl_events.hpp"

#include "nccl_math.hpp"

namespace stallscope::cuda {

Collective nccl_collective(NcclComm& comm, std::string_view func, uint64_t count,
                           std::string_view datatype, int peer) noexcept {
  Collective c;
  c.op = nccl_op(func);
  const int type = nccl_type_id(datatype);
  c.dtype = type < 0 ? 0xff : static_cast<uint8_t>(type);
  c.bytes = nccl_call_bytes(count, nccl_type_size(type));
  c.comm_id = comm.id;
  c.seq = comm.next_seq.fetch_add(1, std::memory_order_relaxed);
  c.rank = comm.rank;
  c.nranks = comm.nranks;
  c.peer = peer;
  c.enqueued = true;  // NCCL stops the event once the work is enqueued
  return c;
}

}  // namespace stallscope::cuda
