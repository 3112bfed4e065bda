// Recording the topology into the trace, once per host and run.
#pragma once

#include <string_view>

namespace stallscope::topo {

// Records the attachments "topology" (JSON) and "topology.hwloc.xml" into
// this process's trace if it is the first process of this host to claim
// `run_dir` (STALLSCOPE_OUT when empty). Returns 0 when recorded, 1 when
// another process of the host already did, or -errno. Takes milliseconds
// (hwloc reads sysfs): call at start-up, never per step. noexcept.
int capture_topology(std::string_view run_dir = {}) noexcept;

}  // namespace stallscope::topo
