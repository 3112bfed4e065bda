// The topology parser over the shipped hwloc XML of a two-socket, 4-GPU
// machine (two_socket_4gpu.xml, written by make_test_xml.py), NVML facts
// from a fake NVML, this machine's own topology, and the trace attachment.
#include <dlfcn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "libtrace/probe_runner.hpp"
#include "stallscope/reader.hpp"
#include "stallscope/topo/capture.hpp"
#include "stallscope/topo/topology.hpp"
#include "stallscope/trace.h"

namespace tp = stallscope::topo;

namespace {

tp::Topology load(bool nvml, bool nvswitch = false) {
  std::ifstream f(STALLSCOPE_TOPO_XML);
  std::stringstream s;
  s << f.rdbuf();
  std::string err;
  auto t = tp::parse_hwloc_xml(s.str(), STALLSCOPE_TOPO_XML, &err);
  BOOST_TEST_REQUIRE(t.has_value(), err);
  if (nvml) {
    setenv("STALLSCOPE_NVML_LIB", STALLSCOPE_FAKE_NVML, 1);
    setenv("FAKE_NVML_NVSWITCH", nvswitch ? "1" : "0", 1);
    tp::add_nvml(*t);
    unsetenv("STALLSCOPE_NVML_LIB");
  }
  return *t;
}

const tp::PciDevice& by_bus(const tp::Topology& t, const std::string& bus) {
  for (const auto& d : t.devices)
    if (d.bus_id == bus) return d;
  BOOST_FAIL("no device " + bus);
  return t.devices.front();
}

// Runs `stallscope topo ARGS`; returns the exit code and stdout+stderr.
int run_cli(const std::string& args, std::string* out) {
  const std::string cmd =
      std::string(STALLSCOPE_TEST_BINARY_DIR) + "/bin/stallscope topo " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  BOOST_TEST_REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(topology)

BOOST_AUTO_TEST_CASE(cpus_numa_and_devices_of_the_two_socket_machine) {
  const auto t = load(false);
  BOOST_TEST(t.hostname == "hgx-test");
  BOOST_TEST(t.packages == 2);
  BOOST_TEST(t.cores == 8);
  BOOST_TEST(t.pus == 16);
  BOOST_TEST_REQUIRE(t.numa.size() == 2u);
  BOOST_TEST(t.numa[0].cpus == "0-7");
  BOOST_TEST(t.numa[1].cpus == "8-15");
  BOOST_TEST(t.numa[1].memory_bytes == 64ull << 30);
  const auto gpus = t.of_kind(tp::DeviceKind::kGpu);
  BOOST_TEST_REQUIRE(gpus.size() == 4u);
  BOOST_TEST(gpus[0]->numa == 0);
  BOOST_TEST(gpus[3]->numa == 1);
  BOOST_TEST(gpus[0]->link_gbps == 63.015385, boost::test_tools::tolerance(1e-4));
  const auto nics = t.of_kind(tp::DeviceKind::kNic);
  BOOST_TEST_REQUIRE(nics.size() == 3u);
  BOOST_TEST(nics[0]->os_names == (std::vector<std::string>{"mlx5_0", "ib0"}),
             boost::test_tools::per_element());
  BOOST_TEST(nics[2]->os_names.at(0) == "eth0");
  BOOST_TEST(nics[2]->numa == 1);
  const auto disks = t.of_kind(tp::DeviceKind::kStorage);
  BOOST_TEST_REQUIRE(disks.size() == 1u);
  BOOST_TEST(disks[0]->os_names.at(0) == "nvme0n1");
  BOOST_TEST(disks[0]->numa == 0);
  BOOST_TEST(disks[0]->cpus == "0-7");
}

BOOST_AUTO_TEST_CASE(relations_follow_the_pci_tree_like_nvidia_smi) {
  const auto t = load(false);
  const auto& g0 = by_bus(t, "0000:12:00.0");
  const auto& g1 = by_bus(t, "0000:13:00.0");
  const auto& g2 = by_bus(t, "0000:92:00.0");
  const auto& nic0 = by_bus(t, "0000:14:00.0");
  const auto& eth = by_bus(t, "0000:9a:00.0");
  const auto& nvme = by_bus(t, "0000:1a:00.0");
  BOOST_TEST(tp::relation(t, g0, g0) == "X");
  BOOST_TEST(tp::relation(t, g0, g1) == "PIX");
  BOOST_TEST(tp::relation(t, g0, nic0) == "PIX");
  BOOST_TEST(tp::relation(t, g0, g2) == "SYS");
  BOOST_TEST(tp::relation(t, g2, eth) == "PHB");
  BOOST_TEST(tp::relation(t, g0, nvme) == "PHB");
  BOOST_TEST(tp::relation(t, nic0, eth) == "SYS");
}

BOOST_AUTO_TEST_CASE(fake_nvml_adds_names_max_pcie_and_nvlink) {
  const auto t = load(true);
  BOOST_TEST(t.nvml == "ok: 4 GPU(s), driver 999.99-fake");
  const auto& g0 = by_bus(t, "0000:12:00.0");
  const auto& g1 = by_bus(t, "0000:13:00.0");
  const auto& g2 = by_bus(t, "0000:92:00.0");
  BOOST_TEST(g0.name == "NVIDIA H100 80GB HBM3");
  BOOST_TEST(g0.gpu_index == 0);
  BOOST_TEST(g2.gpu_index == 2);
  BOOST_TEST(g0.uuid == "GPU-00000000-0000-0000-0000-000000000000");
  BOOST_TEST(g2.uuid == "GPU-00000000-0000-0000-0000-000000000002");
  BOOST_TEST(by_bus(t, "0000:14:00.0").uuid.empty());  // a NIC: no NVML, no uuid
  BOOST_TEST(g0.pcie_max_gen == 5);
  BOOST_TEST(g0.pcie_max_width == 16);
  BOOST_TEST_REQUIRE(g0.nvlinks.size() == 4u);
  BOOST_TEST(g0.nvlinks[0].active);
  BOOST_TEST(!g0.nvlinks[3].active);
  BOOST_TEST(g0.nvlinks[0].remote_bus_id == "0000:13:00.0");
  BOOST_TEST(tp::relation(t, g0, g1) == "NV2");
  BOOST_TEST(tp::relation(t, g0, g2) == "SYS");
  BOOST_TEST(t.of_kind(tp::DeviceKind::kGpu).size() == 4u);  // matched, not added
}

BOOST_AUTO_TEST_CASE(gpus_without_nvml_have_no_uuid) {
  for (const auto* g : load(false).of_kind(tp::DeviceKind::kGpu)) BOOST_TEST(g->uuid.empty());
}

BOOST_AUTO_TEST_CASE(nvswitch_links_join_every_gpu_pair) {
  const auto t = load(true, true);
  BOOST_TEST(tp::relation(t, by_bus(t, "0000:12:00.0"), by_bus(t, "0000:93:00.0")) == "NV4");
  BOOST_TEST(tp::relation(t, by_bus(t, "0000:12:00.0"), by_bus(t, "0000:14:00.0")) == "PIX");
}

BOOST_AUTO_TEST_CASE(missing_nvml_says_why_and_keeps_hwloc_facts) {
  auto t = load(false);
  setenv("STALLSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  tp::add_nvml(t);
  unsetenv("STALLSCOPE_NVML_LIB");
  BOOST_TEST(t.nvml.rfind("no NVIDIA driver (", 0) == 0u, t.nvml);
  BOOST_TEST(t.of_kind(tp::DeviceKind::kGpu).size() == 4u);
}

BOOST_AUTO_TEST_CASE(bad_xml_is_an_error_naming_its_origin) {
  std::string err;
  BOOST_TEST(!tp::parse_hwloc_xml("<topology><oops", "broken.xml", &err).has_value());
  BOOST_TEST(err.find("broken.xml") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(pcie_bandwidth_per_generation_and_width) {
  BOOST_TEST(tp::pcie_gbps(3, 16) == 15.753846, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(tp::pcie_gbps(4, 16) == 31.507692, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(tp::pcie_gbps(5, 16) == 63.015385, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(tp::pcie_gbps(1, 1) == 0.25);
  BOOST_TEST(tp::pcie_gbps(0, 16) == 0.0);
  BOOST_TEST(tp::pcie_gbps(7, 16) == 0.0);
}

BOOST_AUTO_TEST_CASE(text_and_json_carry_the_matrix_and_devices) {
  const auto t = load(true);
  const std::string text = tp::format_text(t);
  BOOST_TEST(text.find("GPU0   X      NV2    SYS    SYS    PIX") != std::string::npos, text);
  BOOST_TEST(text.find("PCIe Gen5 x16 max (63.0 GB/s per direction)") != std::string::npos);
  BOOST_TEST(text.find("NVIDIA H100 80GB HBM3  GPU-00000000-0000-0000-0000-000000000003  NUMA 1") !=
                 std::string::npos,
             text);
  BOOST_TEST(text.find("Legend:") != std::string::npos);
  const auto j = nlohmann::json::parse(tp::to_json(t));
  BOOST_TEST(j["devices"].size() == 8u);
  BOOST_TEST(j["numa"].size() == 2u);
  BOOST_TEST(j["devices"][0]["kind"] == "gpu");
  BOOST_TEST(j["devices"][0]["uuid"] == "GPU-00000000-0000-0000-0000-000000000000");
  BOOST_TEST(j["devices"][0]["pcie_max_gbps"].get<double>() == 63.015385,
             boost::test_tools::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(json_round_trip_keeps_relations_and_nvml_facts) {
  const auto t = load(true);
  std::string err;
  const auto back = tp::from_json(tp::to_json(t), "round-trip", &err);
  BOOST_TEST_REQUIRE(back.has_value(), err);
  BOOST_TEST(tp::format_text(*back) == tp::format_text(t));
  for (const char* bus : {"0000:12:00.0", "0000:93:00.0"})
    BOOST_TEST(by_bus(*back, bus).uuid == by_bus(t, bus).uuid);
  BOOST_TEST(by_bus(*back, "0000:93:00.0").uuid == "GPU-00000000-0000-0000-0000-000000000003");
  BOOST_TEST(!tp::from_json("{\"devices\": 3}", "bad.json", &err).has_value());
  BOOST_TEST(err.find("bad.json: not a stallscope topology") == 0u, err);
  BOOST_TEST(!tp::from_json("{\"devices\": [], \"numa\": [1]}", "x", &err).has_value());
  BOOST_TEST(!tp::from_json("[", "x", &err).has_value());
}

BOOST_AUTO_TEST_CASE(this_machine_reports_cpus_numa_and_devices_without_a_gpu) {
  setenv("STALLSCOPE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  std::string err, xml;
  auto t = tp::discover(&err, &xml);
  unsetenv("STALLSCOPE_NVML_LIB");
  BOOST_TEST_REQUIRE(t.has_value(), err);
  BOOST_TEST(t->pus > 0);
  BOOST_TEST(t->numa.size() >= 1u);
  BOOST_TEST(!xml.empty());
  BOOST_TEST(xml.find("<topology") != std::string::npos);
  BOOST_TEST(t->nvml.rfind("no NVIDIA driver", 0) == 0u, t->nvml);
  BOOST_TEST(tp::format_text(*t).find("hardware threads") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(first_process_of_a_host_attaches_the_topology_once) {
  stallscope::test::TempDir dir;
  const std::string run = dir / "run";
  setenv("STALLSCOPE_OUT", run.c_str(), 1);
  stallscope_init();
  BOOST_TEST(tp::capture_topology() == 0);
  BOOST_TEST(tp::capture_topology() == 1);  // the host's claim is taken
  stallscope_shutdown();
  std::string err;
  const auto files = stallscope::reader::list_trace_files(run, &err);
  BOOST_TEST_REQUIRE(files.size() == 1u, err);
  stallscope::reader::TraceReader r(files[0]);
  int topo = 0, xml = 0;
  for (const auto& a : r.attachments()) {
    topo += a.name == "topology" && nlohmann::json::parse(a.data).contains("devices");
    xml += a.name == "topology.hwloc.xml" && a.data.find("<topology") != std::string::npos;
  }
  BOOST_TEST(topo == 1);
  BOOST_TEST(xml == 1);
  std::string out;  // the recorded topology, shown by the CLI
  BOOST_TEST(run_cli("--trace " + run, &out) == 0);
  BOOST_TEST(out.find("hardware threads") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(cli_prints_the_matrix_of_an_xml_topology) {
  std::string out;
  BOOST_TEST(run_cli(std::string("--xml ") + STALLSCOPE_TOPO_XML, &out) == 0);
  BOOST_TEST(out.find("GPU0   X      PIX    SYS    SYS    PIX") != std::string::npos, out);
  out.clear();
  BOOST_TEST(run_cli("--xml /nonexistent.xml", &out) == 1);
  BOOST_TEST(out.find("--xml /nonexistent.xml: No such file or directory") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(cli_probe_without_a_driver_says_so_in_one_line) {
  if (void* d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(d);
    BOOST_TEST_MESSAGE("SKIP: a CUDA driver is present");
    return;
  }
  std::string out;
  BOOST_TEST(run_cli("--probe", &out) == 1);
  BOOST_TEST(out.find("\nno CUDA driver: bandwidth probe not run (") != std::string::npos, out);
  BOOST_TEST(out.find("hardware threads") != std::string::npos);  // the topology still printed
}

BOOST_AUTO_TEST_SUITE_END()
