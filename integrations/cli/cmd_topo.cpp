// `stallscope topo`: this machine's topology as `nvidia-smi topo -m` shows
// it, plus NUMA affinity and link bandwidths; `--probe` measures pinned and
// pageable H2D/D2H (and P2P with several GPUs). Run it on its own, never
// inside someone's job: the probe saturates the links it measures.
#include <iostream>
#include <memory>

#include "cmd_topo_probe.hpp"
#include "cli_files.hpp"
#include "commands.hpp"
#include "stallscope/reader.hpp"
#include "stallscope/topo/topology.hpp"

namespace stallscope::cli {

namespace {

// hwloc's XML of a large machine is a few MB.
constexpr size_t kMaxTopologyXml = size_t{64} << 20;

struct TopoOptions {
  std::string xml;    // read this hwloc XML instead of this machine
  std::string trace;  // or the topology recorded in these traces
  bool json = false;
  bool probe = false;
  int probe_mib = 256;
};

// The first "topology" attachment among the trace files under `path`.
std::optional<topo::Topology> from_trace(const std::string& path) {
  bool failed = false;
  for (const auto& f : expand_inputs("topo", {path}, &failed)) {
    reader::TraceReader r(f);
    for (const auto& a : r.attachments()) {
      if (a.name != "topology") continue;
      std::string err;
      auto t = topo::from_json(a.data, f + " (attachment topology)", &err);
      if (!t) std::cerr << "stallscope topo: " << err << "\n";
      return t;
    }
  }
  if (!failed) std::cerr << "stallscope topo: --trace " << path << ": no topology recorded\n";
  return std::nullopt;
}

std::optional<topo::Topology> load(const TopoOptions& opt) {
  std::string err;
  if (!opt.trace.empty()) return from_trace(opt.trace);
  if (opt.xml.empty()) {
    auto t = topo::discover(&err);
    if (!t) std::cerr << "stallscope topo: " << err << "\n";
    return t;
  }
  std::string xml;
  err = read_input_file(opt.xml, &xml, kMaxTopologyXml);
  if (!err.empty()) {
    std::cerr << "stallscope topo: --xml " << err << "\n";
    return std::nullopt;
  }
  auto t = topo::parse_hwloc_xml(xml, opt.xml, &err);
  if (!t) std::cerr << "stallscope topo: " << err << "\n";
  return t;
}

int run_topo(const TopoOptions& opt) {
  auto t = load(opt);
  if (!t) return kExitInput;
  if (opt.json)
    std::cout << topo::to_json(*t) << "\n";
  else
    std::cout << topo::format_text(*t);
  if (!opt.probe) return kExitOk;
  std::cout << "\n";
  return run_bandwidth_probe(*t, static_cast<uint64_t>(opt.probe_mib) << 20, std::cout) == 0
             ? kExitOk
             : kExitInput;
}

}  // namespace

Command add_topo_command(CLI::App& parent) {
  auto opt = std::make_shared<TopoOptions>();
  CLI::App* sub = parent.add_subcommand(
      "topo", "This machine's CPUs, NUMA nodes, GPUs, NICs, storage and their links");
  sub->add_option("--xml", opt->xml, "Read an hwloc XML topology (lstopo out.xml) instead")
      ->type_name("FILE");
  sub->add_option("--trace", opt->trace,
                  "Show the topology recorded in a trace file or run directory instead")
      ->type_name("PATH")
      ->excludes(sub->get_option("--xml"));
  sub->add_flag("--json", opt->json, "Print JSON (as stored in traces) instead of text");
  sub->add_flag("--probe", opt->probe,
                "Measure pinned and pageable H2D/D2H bandwidth per GPU (and P2P)");
  sub->add_option("--probe-mib", opt->probe_mib, "Bytes per probe copy, MiB (default 256)")
      ->check(CLI::Range(1, 8192));
  sub->footer(
      "Matrix: X self; NV# NVLink links; PIX at most one PCIe bridge; PXB several bridges;\n"
      "PHB through a host bridge; NODE between host bridges of one NUMA node; SYS across\n"
      "NUMA nodes. GPU names, NVLink and maximum PCIe generation/width come from NVML\n"
      "(STALLSCOPE_NVML_LIB, else libnvidia-ml.so.1) where a driver is present.\n"
      "Run --probe on an idle machine: it saturates the links it measures.\n"
      "Exit status: 0 ok, 1 topology unreadable or probe impossible (no CUDA driver), 2 usage.");
  return {sub, [opt] { return run_topo(*opt); }};
}

}  // namespace stallscope::cli
