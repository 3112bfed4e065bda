// Reads process facts and probe results out of a trace file's metadata and
// attachments (keys documented in docs/report-guide.md "Probes").
#pragma once

#include <string>
#include <vector>

#include "stallscope/analyzer/model.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::analyzer {

ProcessDesc process_of(const reader::TraceReader& r);
// Merges the probes and loader settings one file recorded into `p`.
// Reads the "topology" attachment into p.gpus; a malformed one becomes a
// warning in p.warnings naming the file and the attachment.
void merge_probes(const reader::TraceReader& r, Probes& p);

// What r's "topology" attachment says of the host: its GPUs and how many
// NUMA nodes it has; empty when it has none or a malformed one
// (merge_probes warns). One process per host records it, so the other ranks
// of that host borrow it (input.cpp).
struct HostTopology {
  std::vector<GpuLink> gpus;
  int numa_nodes = 0;
  bool empty() const { return gpus.empty() && numa_nodes == 0; }
};
HostTopology host_topology(const reader::TraceReader& r);

// The host GPU this rank drives: the topology GPU whose UUID a "cuda.device"
// attachment names (the first such device), else the host's only GPU;
// nullptr when it cannot be told.
const GpuLink* rank_gpu(const Probes& p);

// The GPU link H2D copies are judged against: the rank's own GPU
// (rank_gpu) when its link is known; else, among the host's GPUs with a
// known link, those with a maximum generation and width first, then the
// slowest (a bound that holds for every GPU). nullptr when none is known.
const GpuLink* h2d_link(const Probes& p);
// "NVIDIA H200, PCIe Gen5 x16, 63 GB/s" (or the current hwloc link, labelled).
std::string describe_link(const GpuLink& g);

}  // namespace stallscope::analyzer
