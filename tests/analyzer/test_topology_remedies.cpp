// Black-box: the "topology" attachment (integrations/topo JSON) read back by
// the analyzer from real trace files, and the remedies that use the GPU's
// PCIe link: pinned_memory's bound and h2d_below_link. One white-box case
// reads the attachment with merge_probes (analyzer/src/probes.hpp) to check
// the per-GPU facts the report does not print (NUMA node, CPUs).
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "analyzer/report_lookup.hpp"
#include "analyzer/schema_check.hpp"
#include "analyzer/trace_files.hpp"
#include "probes.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"

using namespace stallscope::testing;
namespace an = stallscope::analyzer;

namespace {

// What `stallscope topo --json` prints for a host with one H200 (PCIe Gen5
// x16, idle: hwloc sees the link trained down to 2.5 GB/s) on NUMA node 1.
std::string h200_topology(int gen = 5, int width = 16, double link_gbps = 2.5) {
  return R"({"host":"h1","packages":2,"cores":96,"pus":192,"nvml":"ok, driver 570.86","notes":[],
    "numa":[{"os_index":0,"memory_bytes":1000,"cpus":"0-47"},{"os_index":1,"memory_bytes":1000,"cpus":"48-95"}],
    "devices":[
     {"kind":"nic","bus_id":"0000:0c:00.0","name":"mlx5","os_names":["ib0"],"numa":0,"cpus":"0-47",
      "link_gbps":31.5,"gpu_index":-1,"pcie_max_gen":0,"pcie_max_width":0,"pcie_max_gbps":0,
      "nvlinks":[],"pci_path":[1,2],"pci_path_kind":"hb"},
     {"kind":"gpu","bus_id":"0000:9a:00.0","name":"NVIDIA H200","os_names":["cuda0"],"numa":1,
      "cpus":"48-95","link_gbps":)" +
         std::to_string(link_gbps) + R"(,"gpu_index":0,"pcie_max_gen":)" + std::to_string(gen) +
         R"(,"pcie_max_width":)" + std::to_string(width) +
         R"(,"pcie_max_gbps":63.0,"nvlinks":[],"pci_path":[1,3],"pci_path_kind":"hb"}]})";
}

constexpr int kSteps = 12;

// One trainer: steps of 100 ms, each an H2D copy of `copy_ms` moving
// `bytes` (pinned or pageable) and then kernels for the rest of the step.
void write_copy_run(const std::string& path, uint64_t copy_ms, uint64_t bytes, bool pinned,
                    const std::optional<std::string>& topology, int rank = 0) {
  TraceBuilder b;
  b.header.pid = 4242 + rank;
  b.metadata(R"({"rank":)" + std::to_string(rank) +
             R"(,"host":"h1","affinity_count":4,"config":{"sample_ms":10}})");
  if (topology) b.attachment("topology", *topology);
  b.strings({{1, "trainer"}, {2, "gemm"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, fmt::TrackType::kGpuStream)});
  Records t, d;
  for (int i = 0; i < kSteps; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    add_step(t, uint64_t(i), s, 100 * kMs);
    auto c = ext_of<fmt::CopyExt>(fmt::Ext::kCopy, 7);
    c.bytes = bytes;
    c.src = static_cast<uint8_t>(pinned ? fmt::MemKind::kPinned : fmt::MemKind::kPageable);
    c.dst = static_cast<uint8_t>(fmt::MemKind::kDevice);
    d.core(fmt::Kind::kH2D, 0, s, copy_ms * kMs, 0, 0).ext(c);
    auto k = ext_of<fmt::DeviceExt>(fmt::Ext::kDevice, 7);
    d.core(fmt::Kind::kKernel, 0, s + copy_ms * kMs, (100 - copy_ms) * kMs, 2, 0).ext(k);
  }
  b.events({{1, t}, {2, d}});
  b.end();
  b.write(path);
}

an::RankReport analyze(const TempDir& dir) {
  const auto rep = an::analyze_paths({dir.path()}, {});
  BOOST_REQUIRE(rep.errors.empty());
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  return rep.ranks[0];
}

bool warned(const an::RankReport& r, const std::string& what) {
  for (const auto& w : r.warnings)
    if (w.find(what) != std::string::npos) return true;
  return false;
}

constexpr double kGen5x16 = 3.938462 * 16;  // GB/s per direction

}  // namespace

BOOST_AUTO_TEST_SUITE(topology_remedies)

BOOST_AUTO_TEST_CASE(topology_attachment_gives_each_gpu_link_and_numa_node) {
  TempDir dir;
  write_copy_run(dir.file("a.sst"), 20, 200'000'000, true, h200_topology());
  stallscope::reader::TraceReader r(dir.file("a.sst"));
  an::Probes p;
  an::merge_probes(r, p);
  BOOST_REQUIRE_EQUAL(p.gpus.size(), 1u);  // the NIC is not a GPU
  const an::GpuLink& g = p.gpus[0];
  BOOST_TEST(g.index == 0);
  BOOST_TEST(g.name == "NVIDIA H200");
  BOOST_TEST(g.bus_id == "0000:9a:00.0");
  BOOST_TEST(g.pcie_gen == 5);
  BOOST_TEST(g.pcie_width == 16);
  BOOST_TEST(g.from_max);
  BOOST_TEST(g.gbps == kGen5x16, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(g.numa == 1);
  BOOST_TEST(g.cpus == "48-95");
  BOOST_TEST(p.warnings.empty());
  BOOST_TEST(an::h2d_link(p) == &g);
  BOOST_TEST(an::describe_link(g) == "NVIDIA H200, PCIe Gen5 x16, 63 GB/s");
}

BOOST_AUTO_TEST_CASE(with_several_gpus_the_slowest_known_maximum_link_counts) {
  an::Probes p;
  BOOST_TEST(an::h2d_link(p) == nullptr);
  p.gpus.resize(4);
  p.gpus[0].gbps = kGen5x16, p.gpus[0].from_max = true;
  p.gpus[1].gbps = 31.5, p.gpus[1].from_max = true;
  p.gpus[2].gbps = 2.5, p.gpus[2].from_max = false;  // hwloc's current link of an idle GPU
  p.gpus[3].gbps = 0;                                // unknown
  BOOST_TEST(an::h2d_link(p) == &p.gpus[1]);
}

BOOST_AUTO_TEST_CASE(pageable_copies_are_bounded_by_the_gpu_link_from_the_topology) {
  TempDir dir;
  // Half of each step is a pageable copy of 250 MB: 5 GB/s.
  write_copy_run(dir.file("h1-r0-4242.sst"), 50, 250'000'000, false, h200_topology());
  const auto r = analyze(dir);
  const an::Remedy* m = remedy(r, "pinned_memory");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->inputs_from == "topology");
  BOOST_TEST(m->bound);
  BOOST_TEST(input(*m, "link_bandwidth") == kGen5x16 * 1e9, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(input(*m, "pageable_bandwidth") == 5e9, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->step_ms == 100.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->predicted_step_ms == 100.0 - 50.0 * (1 - 5.0 / kGen5x16),
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->model.find("PCIe Gen5 x16, 63 GB/s") != std::string::npos, m->model);
  // Mostly pageable copies are pinned_memory's case only.
  BOOST_TEST(remedy(r, "h2d_below_link") == nullptr);
  BOOST_TEST(r.warnings.empty());
}

BOOST_AUTO_TEST_CASE(without_max_gen_the_current_hwloc_link_is_used_and_labelled) {
  TempDir dir;
  write_copy_run(dir.file("h1-r0-4242.sst"), 50, 250'000'000, false, h200_topology(0, 0, 31.5));
  const auto r = analyze(dir);
  const an::Remedy* m = remedy(r, "pinned_memory");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->inputs_from == "topology");
  BOOST_TEST(input(*m, "link_bandwidth") == 31.5e9, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->model.find("current PCIe link 31.5 GB/s (hwloc") != std::string::npos, m->model);
}

BOOST_AUTO_TEST_CASE(pinned_copies_at_10_gbps_on_a_gen5_x16_link_are_flagged) {
  TempDir dir;
  // 20 ms per step moving 200 MB pinned: 10 GB/s against a 63 GB/s link.
  write_copy_run(dir.file("h1-r0-4242.sst"), 20, 200'000'000, true, h200_topology());
  const auto r = analyze(dir);
  const an::Remedy* m = remedy(r, "h2d_below_link");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->bound);
  BOOST_TEST(m->inputs_from == "topology");
  BOOST_TEST(input(*m, "pinned_bandwidth") == 10e9, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(input(*m, "link_bandwidth") == kGen5x16 * 1e9, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(input(*m, "h2d_exposed_ms") == 20.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->predicted_step_ms == 100.0 - 20.0 * (1 - 10.0 / (0.8 * kGen5x16)),
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->evidence.find("10.0 GB/s") != std::string::npos, m->evidence);
  BOOST_TEST(m->evidence.find("NVIDIA H200, PCIe Gen5 x16, 63 GB/s") != std::string::npos,
             m->evidence);
  BOOST_TEST(m->pytorch_knob.find("nvidia-smi -q -d PCIE") != std::string::npos);
  BOOST_TEST(remedy(r, "pinned_memory") == nullptr);
}

BOOST_AUTO_TEST_CASE(every_rank_of_the_host_uses_the_topology_one_process_recorded) {
  TempDir dir;
  write_copy_run(dir.file("h1-r0-4242.sst"), 20, 200'000'000, true, h200_topology(), 0);
  write_copy_run(dir.file("h1-r1-4243.sst"), 20, 200'000'000, true, std::nullopt, 1);
  for (size_t threads : {size_t{1}, size_t{2}}) {
    an::AnalyzeOptions opt;
    opt.rank_threads = threads;
    const auto rep = an::analyze_paths({dir.path()}, opt);
    BOOST_REQUIRE_EQUAL(rep.ranks.size(), 2u);
    for (const auto& r : rep.ranks) {
      const an::Remedy* m = remedy(r, "h2d_below_link");
      BOOST_REQUIRE_MESSAGE(m != nullptr, "rank " << r.rank);
      BOOST_TEST(input(*m, "link_bandwidth") == kGen5x16 * 1e9, boost::test_tools::tolerance(1e-6));
    }
  }
}

BOOST_AUTO_TEST_CASE(pinned_copies_at_50_gbps_are_not_flagged) {
  TempDir dir;
  write_copy_run(dir.file("h1-r0-4242.sst"), 20, 1'000'000'000, true, h200_topology());
  const auto r = analyze(dir);
  BOOST_TEST(remedy(r, "h2d_below_link") == nullptr);
  BOOST_TEST(remedy(r, "overlap_copies") != nullptr);  // the copies were still exposed
}

BOOST_AUTO_TEST_CASE(no_topology_means_no_topology_remedy_and_no_warning) {
  TempDir dir;
  write_copy_run(dir.file("h1-r0-4242.sst"), 20, 200'000'000, true, std::nullopt);
  BOOST_TEST(remedy(analyze(dir), "h2d_below_link") == nullptr);
  TempDir dir2;
  write_copy_run(dir2.file("h1-r0-4242.sst"), 50, 250'000'000, false, std::nullopt);
  const auto r = analyze(dir2);
  const an::Remedy* m = remedy(r, "pinned_memory");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->inputs_from == "assumed");
  BOOST_TEST(m->predicted_step_ms == 50.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r.warnings.empty());
}

BOOST_AUTO_TEST_CASE(malformed_topology_is_a_warning_naming_the_attachment) {
  const std::string bad[] = {
      R"({"host":"h1","devices":[{"kind":"gpu","pcie_max_gen)",  // cut: not JSON
      R"({"host":"h1"})",                                        // no devices
      R"([1,2,3])",
  };
  for (const auto& text : bad) {
    TempDir dir;
    write_copy_run(dir.file("h1-r0-4242.sst"), 20, 200'000'000, true, text);
    const auto r = analyze(dir);
    BOOST_TEST(remedy(r, "h2d_below_link") == nullptr);
    BOOST_TEST(warned(r, "attachment \"topology\""), text);
    BOOST_TEST(warned(r, "h1-r0-4242.sst"), text);
  }
}

BOOST_AUTO_TEST_CASE(wrongly_typed_gpu_fields_never_crash_nor_invent_a_link) {
  TempDir dir;
  write_copy_run(dir.file("h1-r0-4242.sst"), 20, 200'000'000, true,
                 R"({"devices":[7,"x",{"kind":"gpu","pcie_max_gen":"five","pcie_max_width":1e300,
                    "gpu_index":-1e300,"numa":null,"link_gbps":"fast","name":3,"uuid":7,
                    "nvlinks":[5,null,{"active":"yes"},{"active":1},{"active":true}]},{"kind":5}]})");
  const auto r = analyze(dir);
  BOOST_TEST(remedy(r, "h2d_below_link") == nullptr);
  BOOST_TEST(r.warnings.empty());
}

BOOST_AUTO_TEST_CASE(json_report_with_topology_remedies_validates_against_the_schema) {
  TempDir dir;
  write_copy_run(dir.file("h1-r0-4242.sst"), 20, 200'000'000, true, h200_topology());
  std::ostringstream out;
  an::write_json(out, an::analyze_paths({dir.path()}, {}));
  const json doc = json::parse(out.str());
  std::ifstream in(STALLSCOPE_REPORT_SCHEMA);
  BOOST_REQUIRE_MESSAGE(in.good(), "cannot open " STALLSCOPE_REPORT_SCHEMA);
  const auto errs = validate(json::parse(in), doc);
  for (const auto& e : errs) BOOST_TEST_MESSAGE(e);
  BOOST_TEST(errs.empty());
  bool found = false;
  for (const auto& m : doc["ranks"][0]["remedies"])
    if (m["id"] == "h2d_below_link") {
      found = true;
      BOOST_TEST(m["inputs_from"] == "topology");
      BOOST_TEST(m["bound"] == true);
      BOOST_TEST(m["inputs"]["link_bandwidth"]["unit"] == "B/s");
    }
  BOOST_TEST(found);
}

BOOST_AUTO_TEST_SUITE_END()
