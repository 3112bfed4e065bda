// The bandwidth probe of `stallscope topo --probe`.
#pragma once

#include <cstdint>
#include <ostream>

#include "stallscope/topo/topology.hpp"

namespace stallscope::cli {

// Measures pinned/pageable H2D and D2H per GPU (best of several copies of
// `bytes`) and P2P between GPU pairs, through the CUDA runtime loaded with
// dlopen. Prints one line per measurement, each against the GPU's maximum
// PCIe link where known. Without a driver prints "no CUDA driver: …" and
// returns -ENODEV; 0 when measured.
int run_bandwidth_probe(const topo::Topology& t, uint64_t bytes, std::ostream& out);

}  // namespace stallscope::cli
