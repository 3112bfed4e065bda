// NCCL byte and bandwidth arithmetic against the nccl-tests formulas
// (doc/PERFORMANCE.md of nccl-tests; docs/gpu.md).
#include <boost/test/unit_test.hpp>

#include "nccl_events.hpp"
#include "nccl_math.hpp"

namespace sc = stallscope::cuda;
using stallscope::format::CollOp;

BOOST_AUTO_TEST_SUITE(nccl_math)

BOOST_AUTO_TEST_CASE(datatype_names_and_ids_give_element_sizes) {
  BOOST_TEST(sc::nccl_type_size("ncclFloat32") == 4u);
  BOOST_TEST(sc::nccl_type_size("ncclBfloat16") == 2u);
  BOOST_TEST(sc::nccl_type_size("ncclFloat16") == 2u);
  BOOST_TEST(sc::nccl_type_size("ncclInt64") == 8u);
  BOOST_TEST(sc::nccl_type_size("ncclFloat8e4m3") == 1u);
  BOOST_TEST(sc::nccl_type_size("ncclDouble") == 8u);
  BOOST_TEST(sc::nccl_type_size("nonsense") == 0u);
  BOOST_TEST(sc::nccl_type_size(7) == 4u);   // ncclFloat32
  BOOST_TEST(sc::nccl_type_size(12) == 0u);  // ncclNumTypes
  BOOST_TEST(sc::nccl_type_id("ncclBfloat16") == 9);
}

BOOST_AUTO_TEST_CASE(bus_factors_are_the_nccl_tests_ones) {
  for (uint32_t n : {1u, 2u, 4u, 8u, 16u}) {
    const double d = n;
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kAllReduce, n) == 2 * (d - 1) / d,
               boost::test_tools::tolerance(1e-12));
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kAllGather, n) == (d - 1) / d,
               boost::test_tools::tolerance(1e-12));
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kReduceScatter, n) == (d - 1) / d,
               boost::test_tools::tolerance(1e-12));
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kAllToAll, n) == (d - 1) / d,
               boost::test_tools::tolerance(1e-12));
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kBroadcast, n) == 1.0);
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kReduce, n) == 1.0);
    BOOST_TEST(sc::nccl_bus_factor(CollOp::kSend, n) == 1.0);
  }
}

BOOST_AUTO_TEST_CASE(all_reduce_of_1_gib_on_8_ranks_in_10_ms) {
  // S = 2^30 B, t = 10 ms: algbw = 107.37 GB/s, busbw = 107.37 * 14/8.
  const uint64_t bytes = sc::nccl_call_bytes(uint64_t{1} << 28, 4);
  BOOST_TEST(bytes == (uint64_t{1} << 30));
  const auto bw = sc::nccl_bandwidth(CollOp::kAllReduce, bytes, 8, 10'000'000);
  BOOST_TEST(bw.alg_gbps == 107.3741824, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(bw.bus_gbps == 107.3741824 * 1.75, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(all_gather_size_counts_every_ranks_part) {
  // sendcount 1 Mi floats on 4 ranks: S = 16 MiB; 1 ms -> algbw 16.777 GB/s,
  // busbw = algbw * 3/4.
  const uint64_t call = sc::nccl_call_bytes(uint64_t{1} << 20, 4);
  BOOST_TEST(sc::nccl_data_size(CollOp::kAllGather, call, 4) == (uint64_t{16} << 20));
  BOOST_TEST(sc::nccl_data_size(CollOp::kReduceScatter, call, 4) == (uint64_t{16} << 20));
  BOOST_TEST(sc::nccl_data_size(CollOp::kAllReduce, call, 4) == (uint64_t{4} << 20));
  const auto bw = sc::nccl_bandwidth(CollOp::kAllGather, call, 4, 1'000'000);
  BOOST_TEST(bw.alg_gbps == 16.777216, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(bw.bus_gbps == 16.777216 * 0.75, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(one_rank_has_no_bus_traffic_and_zero_time_no_bandwidth) {
  BOOST_TEST(sc::nccl_bandwidth(CollOp::kAllReduce, 1 << 20, 1, 1000).bus_gbps == 0.0);
  BOOST_TEST(sc::nccl_bandwidth(CollOp::kAllReduce, 1 << 20, 8, 0).alg_gbps == 0.0);
  BOOST_TEST(sc::nccl_bandwidth(CollOp::kAllReduce, 1 << 20, 8, -5).bus_gbps == 0.0);
}

BOOST_AUTO_TEST_CASE(calls_get_op_bytes_communicator_and_a_per_communicator_sequence) {
  sc::NcclComm comm;
  comm.id = 0x1234;
  comm.rank = 3;
  comm.nranks = 8;
  auto a = sc::nccl_collective(comm, "AllReduce", 1000, "ncclFloat32", -1);
  auto b = sc::nccl_collective(comm, "Send", 10, "ncclBfloat16", 5);
  auto c = sc::nccl_collective(comm, "Mystery", 10, "ncclWhat", -1);
  BOOST_TEST(static_cast<int>(a.op) == static_cast<int>(CollOp::kAllReduce));
  BOOST_TEST(a.bytes == 4000u);
  BOOST_TEST(a.dtype == 7u);
  BOOST_TEST(a.comm_id == 0x1234u);
  BOOST_TEST(a.rank == 3u);
  BOOST_TEST(a.nranks == 8u);
  BOOST_TEST(a.seq == 0u);
  BOOST_TEST(a.enqueued);  // the plugin's span ends when NCCL has enqueued the work
  BOOST_TEST(static_cast<int>(b.op) == static_cast<int>(CollOp::kSend));
  BOOST_TEST(b.bytes == 20u);
  BOOST_TEST(b.peer == 5);
  BOOST_TEST(b.seq == 1u);
  BOOST_TEST(static_cast<int>(c.op) == static_cast<int>(CollOp::kUnknown));
  BOOST_TEST(c.bytes == 0u);
  BOOST_TEST(c.dtype == 0xffu);
  BOOST_TEST(c.seq == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
