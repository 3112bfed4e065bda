// The GPU side the analyzer joins from several records: NCCL kernels (CUPTI,
// no communicator) tied to the NCCL calls that launched them (nccl_join.hpp),
// the bus bandwidth they reach and the collectives_below_link remedy; and
// the GPU a rank drives ("cuda.device" attachments matched to the topology
// by UUID) with the numa_workers remedy.
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"
#include "analyzer/report_lookup.hpp"
#include "analyzer/trace_files.hpp"
#include "nccl_join.hpp"
#include "probes.hpp"
#include "stallscope/analyzer/analyzer.hpp"
#include "stallscope/analyzer/render.hpp"

using namespace stallscope::testing;
namespace an = stallscope::analyzer;
using stallscope::format::CollOp;

namespace {

constexpr uint64_t kComm = 0xC0FFEE;
constexpr uint64_t kMiB = 1 << 20;

// Host-side NCCL call on `track` [a, b] ms: communicator kComm, sequence seq.
Ev call(uint32_t track, double a, double b, uint64_t seq, uint64_t bytes = 64 * kMiB,
        uint32_t nranks = 2) {
  Ev e = Ev::span(Kind::kCollective, track, ms(a), ms(b));
  e.coll() = {.comm = kComm, .seq = seq, .bytes = bytes, .nranks = nranks,
              .op = CollOp::kAllReduce, .enqueued = true, .join_only = false};
  return e;
}
Ev launch(uint32_t track, double a, double b, uint64_t corr) {
  return Ev::span(Kind::kApiCall, track, ms(a), ms(b)).with_corr(corr);
}
Ev kernel(uint32_t track, double a, double b, uint64_t corr) {
  Ev e = Ev::span(Kind::kCollective, track, ms(a), ms(b)).with_corr(corr);
  e.coll().op = CollOp::kAllReduce;
  return e;
}

// Step i of 100 ms with one NCCL call [1, 2] ms in, its launch at 1.5 ms
// (correlation 1000 + i) and its 20 ms kernel from 2 ms.
void nccl_step(RankBuilder& b, int i, uint32_t nranks) {
  const double s = i * 100.0;
  b.step(uint64_t(i), s, s + 100);
  b.t.events.push_back(call(b.trainer, s + 1, s + 2, uint64_t(i), 64 * kMiB, nranks));
  b.t.events.push_back(launch(b.trainer, s + 1.5, s + 1.6, 1000 + i));
  b.t.events.push_back(kernel(b.device, s + 2, s + 22, 1000 + i));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nccl_join)

// Every arrival order of the three records joins the kernel once.
BOOST_AUTO_TEST_CASE(a_kernel_joins_its_call_whatever_arrives_first) {
  const Ev c = call(0, 10, 11, 7), l = launch(0, 10.2, 10.3, 99), k = kernel(1, 12, 20, 99);
  enum Step { kCall, kLaunch, kKernel };
  const std::vector<std::vector<Step>> orders = {
      {kCall, kLaunch, kKernel}, {kLaunch, kCall, kKernel}, {kKernel, kLaunch, kCall},
      {kKernel, kCall, kLaunch}, {kLaunch, kKernel, kCall}, {kCall, kKernel, kLaunch}};
  for (const auto& order : orders) {
    an::NcclJoin j;
    std::vector<Ev> joined;
    for (Step s : order) {
      if (s == kCall) j.add_call(c);
      if (s == kLaunch) j.add_launch(l);
      if (s == kKernel) {
        Ev e = k;
        if (j.join(e)) joined.push_back(e);
      }
      for (const Ev& e : j.joined()) joined.push_back(e);
      j.joined().clear();
    }
    BOOST_REQUIRE_EQUAL(joined.size(), 1u);
    BOOST_TEST(joined[0].coll().comm == kComm);
    BOOST_TEST(joined[0].coll().seq == 7u);
    BOOST_TEST(joined[0].coll().bytes == 64 * kMiB);
    BOOST_TEST(joined[0].coll().nranks == 2u);
    BOOST_TEST(joined[0].start == ms(12));  // the device's times stay
    BOOST_TEST(j.matched() == 1u);
    BOOST_TEST(j.unmatched() == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_launch_outside_every_call_of_its_thread_is_never_joined) {
  an::NcclJoin j;
  j.add_call(call(0, 10, 11, 1));
  j.add_call(call(0, 20, 21, 2));
  j.add_launch(launch(0, 15, 15.1, 5));  // between the calls (e.g. ncclGroupEnd's launch)
  Ev k = kernel(1, 16, 18, 5);
  BOOST_TEST(!j.join(k));
  BOOST_TEST(k.coll().comm == 0u);
  BOOST_TEST(j.matched() == 0u);
  BOOST_TEST(j.unmatched() == 1u);
  // A launch on another thread than the call is not joined either.
  j.add_launch(launch(3, 20.2, 20.3, 6));
  Ev k2 = kernel(1, 22, 23, 6);
  BOOST_TEST(!j.join(k2));
  BOOST_TEST(j.matched() == 0u);
}

// With stallscope's NCCL profiler plugin active, the plugin's event starts
// after the launch, nested in the shim's join-only span of the same call,
// and is recorded before it: the shim's span gives the identity, and the
// plugin's event settles nothing.
BOOST_AUTO_TEST_CASE(the_shims_join_only_span_serves_beside_the_plugins_event) {
  for (bool kernel_first : {true, false}) {
    an::NcclJoin j;
    Ev shim0 = call(0, 1, 2, 0);
    shim0.coll().join_only = true;
    j.add_call(shim0);  // an earlier call: the shim's spans are in use
    j.add_launch(launch(0, 10.2, 10.3, 99));
    Ev k = kernel(1, 12, 20, 99);
    bool joined = false;
    if (kernel_first) joined = j.join(k);
    Ev plugin = call(0, 10.5, 10.6, 7);  // NCCL's hash as communicator
    plugin.coll().comm = 0xAB;
    j.add_call(plugin);
    Ev shim = call(0, 10, 11, 7);
    shim.coll().join_only = true;
    j.add_call(shim);
    if (!kernel_first) joined = j.join(k);
    for (const Ev& e : j.joined()) k = e, joined = true;
    BOOST_TEST_CONTEXT("kernel first: " << kernel_first) {
      BOOST_TEST(joined);
      BOOST_TEST(k.coll().comm == kComm);  // the shim's id, the same on every rank
      BOOST_TEST(k.coll().seq == 7u);
      BOOST_TEST(j.unmatched() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(launches_before_the_first_nccl_record_still_count) {
  an::NcclJoin j;
  for (uint64_t corr = 1; corr <= 5000; ++corr)  // a long CUDA-only prologue
    j.add_launch(launch(0, double(corr) * 0.01, double(corr) * 0.01 + 0.001, corr));
  j.add_launch(launch(0, 100.2, 100.3, 9000));
  j.add_call(call(0, 100, 101, 0));
  Ev k = kernel(1, 102, 110, 9000);
  BOOST_TEST(j.join(k));
  BOOST_TEST(k.coll().seq == 0u);
  BOOST_TEST(k.coll().comm == kComm);
}

BOOST_AUTO_TEST_CASE(waiting_kernels_are_bounded_and_counted) {
  an::NcclJoin j;
  j.add_call(call(0, 0, 1, 0));
  for (uint64_t corr = 1; corr <= 10000; ++corr) {  // launches never recorded
    Ev k = kernel(1, 2, 3, corr);
    BOOST_TEST_REQUIRE(!j.join(k));
  }
  BOOST_TEST(j.unmatched() == 10000u);
  BOOST_TEST(j.matched() == 0u);
  // The oldest waiting kernels were let go: their launch joins nothing now,
  // while a recent one still joins.
  j.add_launch(launch(0, 0.2, 0.3, 1));
  BOOST_TEST(j.joined().empty());
  j.add_launch(launch(0, 0.4, 0.5, 10000));
  BOOST_TEST(j.joined().size() == 1u);
}

// NCCL kernels with launches but no NCCL call recorded at all: the report
// says why the comm stage has no bus bandwidth.
BOOST_AUTO_TEST_CASE(kernels_never_tied_to_a_call_are_a_warning) {
  RankBuilder b;
  for (int i = 0; i < 6; ++i) {
    const double s = i * 100.0;
    b.step(uint64_t(i), s, s + 100);
    b.t.events.push_back(launch(b.trainer, s + 1.5, s + 1.6, 1000 + i));
    b.t.events.push_back(kernel(b.device, s + 2, s + 22, 1000 + i));
  }
  const auto r = b.analyze();
  bool said = false;
  for (const auto& w : r.warnings) said = said || w.find("6 NCCL kernel(s) but none tied") == 0;
  BOOST_TEST(said);
  // Calibration: with the calls recorded, no such warning.
  RankBuilder c;
  for (int i = 0; i < 6; ++i) {
    nccl_step(c, i, 4);
  }
  for (const auto& w : c.analyze().warnings) BOOST_TEST(w.find("none tied") == std::string::npos, w);
}

// Through the engine: joined kernels become cross-rank instances and give
// the comm stage its bus bandwidth (nccl-tests: all-reduce busbw = S/t ×
// 2(n-1)/n).
BOOST_AUTO_TEST_CASE(joined_kernels_give_instances_and_bus_bandwidth) {
  RankBuilder b;
  for (int i = 0; i < 12; ++i) {
    nccl_step(b, i, 4);
    b.kernel(i * 100.0 + 22, i * 100.0 + 100);
  }
  const auto r = b.analyze();
  BOOST_REQUIRE_EQUAL(r.collectives.size(), 12u);
  for (size_t i = 0; i < r.collectives.size(); ++i) {
    BOOST_TEST(r.collectives[i].comm_id == kComm);
    BOOST_TEST(r.collectives[i].seq == i);
    BOOST_TEST(r.collectives[i].arrival_ns == ms(i * 100.0 + 2));  // device side, not the call
  }
  const an::Stage* comm = stage(r, "comm");
  BOOST_REQUIRE(comm != nullptr);
  BOOST_TEST(comm->measured);
  const double busbw = 64.0 * kMiB / 0.020 * (2.0 * 3 / 4);
  BOOST_TEST(number(*comm, "bus_bandwidth") == busbw, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(number(*comm, "large_bus_bandwidth") == busbw, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(number(*comm, "collective_kernels") == 12.0);
  BOOST_TEST(number(*comm, "unjoined_collective_kernels") == 0.0);
  // The call's host time is the trainer's API time, the kernel's the transfer.
  BOOST_TEST(part_ms(r, 5, Part::kCommTransfer) == 20.0, boost::test_tools::tolerance(1e-6));
}

// Two all-reduces per step overlapping each other (two streams): their
// device time summed exceeds the step, yet the comm stage is no input
// stage and never the bottleneck.
BOOST_AUTO_TEST_CASE(overlapping_collectives_are_not_the_bottleneck) {
  RankBuilder b;
  for (int i = 0; i < 12; ++i) {
    const double s = i * 100.0;
    b.step(uint64_t(i), s, s + 100);
    b.t.events.push_back(call(b.trainer, s + 1, s + 2, uint64_t(2 * i), 64 * kMiB, 4));
    b.t.events.push_back(launch(b.trainer, s + 1.5, s + 1.6, 1000 + 2 * i));
    b.t.events.push_back(kernel(b.device, s + 2, s + 72, 1000 + 2 * i));
    b.t.events.push_back(call(b.trainer, s + 3, s + 4, uint64_t(2 * i + 1), 64 * kMiB, 4));
    b.t.events.push_back(launch(b.trainer, s + 3.5, s + 3.6, 1001 + 2 * i));
    b.t.events.push_back(kernel(b.device, s + 20, s + 90, 1001 + 2 * i));
  }
  const auto r = b.analyze();
  const an::Stage* comm = stage(r, "comm");
  BOOST_REQUIRE(comm != nullptr);
  BOOST_TEST(comm->measured);
  BOOST_TEST(comm->headroom() < 1.0);  // 140 ms of kernels in a 100 ms step
  BOOST_TEST(r.bottleneck != "comm");
}

BOOST_AUTO_TEST_CASE(one_rank_collectives_have_no_bus_bandwidth) {
  RankBuilder b;
  for (int i = 0; i < 8; ++i) {
    nccl_step(b, i, 1);
  }
  const auto r = b.analyze();
  BOOST_TEST(r.collectives.size() == 8u);  // still instances
  const an::Stage* comm = stage(r, "comm");
  BOOST_REQUIRE(comm != nullptr);
  BOOST_TEST(!comm->measured);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- files: topology, "cuda.device", affinity, NCCL records

namespace {

// Two sockets (CPUs 0-47 on node 0, 48-95 on node 1), GPU0 on node 0 and
// GPU1 on node 1, each with `nvlinks` active NVLink links to NVSwitches.
std::string two_gpu_topology(int nvlinks = 0) {
  std::string links = "[";
  for (int i = 0; i < nvlinks; ++i)
    links += std::string(i ? "," : "") + R"({"link":)" + std::to_string(i) +
             R"(,"active":true,"remote":"0000:c0:00.0","remote_is_switch":true})";
  links += "]";
  auto gpu = [&](int i, const char* bus, int numa, const char* cpus) {
    return R"({"kind":"gpu","bus_id":")" + std::string(bus) + R"(","name":"NVIDIA H100",)" +
           R"("uuid":"GPU-00000000-0000-0000-0000-00000000000)" + std::to_string(i) +
           R"(","os_names":[],"numa":)" + std::to_string(numa) + R"(,"cpus":")" + cpus +
           R"(","link_gbps":2.5,"gpu_index":)" + std::to_string(i) +
           R"(,"pcie_max_gen":5,"pcie_max_width":16,"nvlinks":)" + links + "}";
  };
  return R"({"host":"h1","packages":2,"cores":96,"pus":96,"nvml":"ok","notes":[],
    "numa":[{"os_index":0,"memory_bytes":1,"cpus":"0-47"},{"os_index":1,"memory_bytes":1,"cpus":"48-95"}],
    "devices":[)" +
         gpu(0, "0000:1b:00.0", 0, "0-47") + "," + gpu(1, "0000:9a:00.0", 1, "48-95") + "]}";
}

std::string cuda_device(int gpu) {
  return R"({"id":0,"uuid":"GPU-00000000-0000-0000-0000-00000000000)" + std::to_string(gpu) +
         R"(","name":"NVIDIA H100","mig":false})";
}

struct RunSpec {
  int rank = 0;
  std::string affinity = "0-95";
  std::optional<std::string> topology;
  std::optional<std::string> device;  // "cuda.device" attachment
  uint64_t h2d_ms = 30;               // pageable H2D per step
  uint64_t coll_ms = 0;               // NCCL all-reduce kernel per step (0: none)
  uint64_t coll_bytes = 64 * kMiB;
  uint32_t nranks = 2;
  std::string host = "h1";
};

// 12 steps of 100 ms: an H2D copy, an NCCL all-reduce (call, launch, kernel:
// the kernel's block first, as CUPTI's buffer may come before the thread's),
// kernels for the rest.
void write_run(const std::string& path, const RunSpec& spec) {
  TraceBuilder b;
  b.header.pid = 4242 + spec.rank;
  b.metadata(R"({"rank":)" + std::to_string(spec.rank) + R"(,"host":")" + spec.host + R"(","affinity":")" +
             spec.affinity + R"(","affinity_count":8,"config":{"sample_ms":10}})");
  if (spec.topology) b.attachment("topology", *spec.topology);
  if (spec.device) b.attachment("cuda.device", *spec.device);
  b.strings({{1, "trainer"}, {2, "gemm"}, {3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, fmt::TrackType::kGpuStream)});
  Records t, d;
  for (int i = 0; i < 12; ++i) {
    const uint64_t s = kBase + i * 100 * kMs;
    add_step(t, uint64_t(i), s, 100 * kMs);
    uint64_t at = s;
    auto c = ext_of<fmt::CopyExt>(fmt::Ext::kCopy, 7);
    c.bytes = 100'000'000;
    c.src = static_cast<uint8_t>(fmt::MemKind::kPageable);
    c.dst = static_cast<uint8_t>(fmt::MemKind::kDevice);
    d.core(fmt::Kind::kH2D, 0, at, spec.h2d_ms * kMs, 0, 0).ext(c);
    at += spec.h2d_ms * kMs;
    if (spec.coll_ms > 0) {
      auto host = ext_of<fmt::CollectiveExt>(fmt::Ext::kCollective,
                                             static_cast<uint32_t>(CollOp::kAllReduce));
      host.bytes = spec.coll_bytes;
      host.comm_id = kComm;
      host.seq = uint64_t(i);
      host.rank = uint32_t(spec.rank);
      host.nranks = spec.nranks;
      host.peer = -1;
      host.flags = fmt::kCollEnqueued;
      t.core(fmt::Kind::kCollective, 0, at - kMs, kMs / 2, 0, 0).ext(host);
      auto api = ext_of<fmt::ApiExt>(fmt::Ext::kApi, 0);
      t.core(fmt::Kind::kApiCall, 0, at - kMs + kMs / 10, kMs / 10, 0, 500 + i).ext(api);
      auto dev = ext_of<fmt::CollectiveExt>(fmt::Ext::kCollective,
                                            static_cast<uint32_t>(CollOp::kAllReduce));
      dev.peer = -1;
      d.core(fmt::Kind::kCollective, 0, at, spec.coll_ms * kMs, 3, 500 + i).ext(dev);
      at += spec.coll_ms * kMs;
    }
    auto k = ext_of<fmt::DeviceExt>(fmt::Ext::kDevice, 7);
    d.core(fmt::Kind::kKernel, 0, at, s + 100 * kMs - at, 2, 0).ext(k);
  }
  b.events({{2, d}, {1, t}});
  b.end();
  b.write(path);
}

an::Report analyze(const TempDir& dir) {
  const auto rep = an::analyze_paths({dir.path()}, {});
  BOOST_REQUIRE(rep.errors.empty());
  return rep;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(numa_workers)

BOOST_AUTO_TEST_CASE(cuda_device_attachment_names_the_gpu_of_the_rank) {
  TempDir dir;
  RunSpec spec;
  spec.topology = two_gpu_topology();
  spec.device = cuda_device(1);
  write_run(dir.file("h1-r0-4242.sst"), spec);
  stallscope::reader::TraceReader r(dir.file("h1-r0-4242.sst"));
  an::Probes p;
  an::merge_probes(r, p);
  BOOST_REQUIRE_EQUAL(p.devices.size(), 1u);
  BOOST_TEST(p.devices[0].id == 0);
  BOOST_TEST(p.devices[0].uuid == "GPU-00000000-0000-0000-0000-000000000001");
  BOOST_TEST(p.host_numa_nodes == 2);
  const an::GpuLink* g = an::rank_gpu(p);
  BOOST_REQUIRE(g != nullptr);
  BOOST_TEST(g->bus_id == "0000:9a:00.0");
  BOOST_TEST(g->numa == 1);
  // Two GPUs and no device named: which one is not known.
  an::Probes q;
  q.gpus = p.gpus;
  BOOST_TEST(an::rank_gpu(q) == nullptr);
  q.gpus.resize(1);  // the host's only GPU
  BOOST_TEST(an::rank_gpu(q) == &q.gpus[0]);
}

BOOST_AUTO_TEST_CASE(processes_pinned_to_the_other_socket_are_flagged) {
  TempDir dir;
  RunSpec spec;
  spec.topology = two_gpu_topology();
  spec.device = cuda_device(1);  // GPU1: node 1, CPUs 48-95
  spec.affinity = "0-47";
  write_run(dir.file("h1-r0-4242.sst"), spec);
  const auto rep = analyze(dir);
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 1u);
  const an::Remedy* m = remedy(rep.ranks[0], "numa_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->inputs_from == "assumed");
  BOOST_TEST(input(*m, "gpu_numa_node") == 1.0);
  BOOST_TEST(input(*m, "allowed_cpus_on_gpu_node") == 0.0);
  BOOST_TEST(input(*m, "h2d_exposed_ms") == 30.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->predicted_step_ms == 100.0 - 0.25 * 30.0, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(m->loader_knob.find("--cpunodebind=1") != std::string::npos, m->loader_knob);
  BOOST_TEST(m->evidence.find("0000:9a:00.0") != std::string::npos, m->evidence);
  BOOST_TEST(m->evidence.find("NUMA node 1") != std::string::npos, m->evidence);
}

BOOST_AUTO_TEST_CASE(processes_on_the_gpu_node_or_unpinned_are_not_flagged) {
  for (const std::string affinity : {"48-95", "0-95", "40-95"}) {
    TempDir dir;
    RunSpec spec;
    spec.topology = two_gpu_topology();
    spec.device = cuda_device(1);
    spec.affinity = affinity;
    write_run(dir.file("h1-r0-4242.sst"), spec);
    BOOST_TEST(remedy(analyze(dir).ranks[0], "numa_workers") == nullptr, affinity);
  }
  // Pinned to node 0 and driving GPU0 (node 0): right.
  TempDir dir;
  RunSpec spec;
  spec.topology = two_gpu_topology();
  spec.device = cuda_device(0);
  spec.affinity = "0-47";
  write_run(dir.file("h1-r0-4242.sst"), spec);
  BOOST_TEST(remedy(analyze(dir).ranks[0], "numa_workers") == nullptr);
}

BOOST_AUTO_TEST_CASE(without_the_gpu_identity_nothing_is_guessed) {
  TempDir dir;
  RunSpec spec;
  spec.topology = two_gpu_topology();  // two GPUs, no cuda.device
  spec.affinity = "0-47";
  write_run(dir.file("h1-r0-4242.sst"), spec);
  BOOST_TEST(remedy(analyze(dir).ranks[0], "numa_workers") == nullptr);
}

BOOST_AUTO_TEST_CASE(malformed_cuda_device_is_a_warning) {
  for (const std::string bad : {R"({"uuid":"GPU-1"})", R"(not json)", R"({"id":"zero"})"}) {
    TempDir dir;
    RunSpec spec;
    spec.topology = two_gpu_topology();
    spec.device = bad;
    spec.affinity = "0-47";
    write_run(dir.file("h1-r0-4242.sst"), spec);
    const auto r = analyze(dir).ranks[0];
    BOOST_TEST(remedy(r, "numa_workers") == nullptr, bad);
    bool warned = false;
    for (const auto& w : r.warnings) warned |= w.find("\"cuda.device\"") != std::string::npos;
    BOOST_TEST(warned, bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(collectives_below_link)

// Two ranks of one host, each on a GPU with 18 NVLink links (450 GB/s
// assumed), 64 MiB all-reduces taking 20 ms: busbw 3.4 GB/s.
BOOST_AUTO_TEST_CASE(slow_all_reduces_on_nvlink_are_flagged_on_every_rank) {
  TempDir dir;
  for (int rank : {0, 1}) {
    RunSpec spec;
    spec.rank = rank;
    spec.topology = two_gpu_topology(18);
    spec.device = cuda_device(rank);
    spec.affinity = rank == 0 ? "0-47" : "48-95";
    spec.h2d_ms = 5;
    spec.coll_ms = 20;
    write_run(dir.file("h1-r" + std::to_string(rank) + "-" + std::to_string(4242 + rank) + ".sst"),
              spec);
  }
  const auto rep = analyze(dir);
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 2u);
  const double busbw = 64.0 * kMiB / 0.020;  // × 2(n-1)/n = 1 for two ranks
  for (const auto& r : rep.ranks) {
    BOOST_TEST_CONTEXT("rank " << r.rank) {
      const an::Remedy* m = remedy(r, "collectives_below_link");
      BOOST_REQUIRE(m != nullptr);
      BOOST_TEST(m->bound);
      BOOST_TEST(input(*m, "bus_bandwidth_p90") == busbw, boost::test_tools::tolerance(1e-4));
      BOOST_TEST(input(*m, "link_bandwidth") == 450e9, boost::test_tools::tolerance(1e-9));
      BOOST_TEST(input(*m, "exposed_transfer_ms") == 20.0, boost::test_tools::tolerance(1e-3));
      BOOST_TEST(m->predicted_step_ms == 100.0 - 20.0 * (1 - busbw / (0.8 * 450e9)),
                 boost::test_tools::tolerance(1e-4));
      BOOST_TEST(m->evidence.find("18 NVLink links") != std::string::npos, m->evidence);
      BOOST_TEST(r.collectives.size() == 12u);
      BOOST_TEST(remedy(r, "numa_workers") == nullptr);  // each rank on its GPU's node
    }
  }
  // Matched across ranks by (communicator, sequence) from the joined calls.
  BOOST_TEST(rep.cross.instances == 12u);
  std::ostringstream text;
  an::write_text(text, rep, {});
  BOOST_TEST(text.str().find("bus bandwidth 3.4 GB/s (3.4 GB/s at 32 MiB and more) over 12 "
                             "collective kernel(s)") != std::string::npos,
             text.str());
}

// Two hosts of two ranks each, the slow all-reduces on 2-rank
// communicators: the rank count fits one host, but a communicator with
// members on both hosts crosses the network, so NVLink is not its link and
// no rank is told it is below it (the cross-rank pass knows the members).
BOOST_AUTO_TEST_CASE(collectives_across_hosts_are_not_judged_against_nvlink) {
  TempDir dir;
  for (int rank : {0, 1, 2, 3}) {
    RunSpec spec;
    spec.rank = rank;
    spec.host = rank < 2 ? "h1" : "h2";
    spec.topology = two_gpu_topology(18);
    spec.device = cuda_device(rank % 2);
    spec.affinity = rank % 2 == 0 ? "0-47" : "48-95";
    spec.h2d_ms = 5;
    spec.coll_ms = 20;
    write_run(dir.file(spec.host + "-r" + std::to_string(rank) + "-" + std::to_string(4242 + rank) + ".sst"),
              spec);
  }
  const auto rep = analyze(dir);
  BOOST_REQUIRE_EQUAL(rep.ranks.size(), 4u);
  BOOST_TEST(rep.cross.instances == 12u);  // one communicator, across the hosts
  for (const auto& r : rep.ranks) BOOST_TEST(remedy(r, "collectives_below_link") == nullptr);
}

BOOST_AUTO_TEST_CASE(fast_all_reduces_small_messages_or_pcie_bound_ones_are_not) {
  struct Case {
    const char* what;
    uint64_t bytes;
    int nvlinks;
    uint32_t nranks;
  };
  // 4 GiB in 20 ms: 215 GB/s, half of 450; 16 MiB: latency-bound, not judged;
  // 1 GiB over PCIe Gen5 x16 (63 GB/s): 54 GB/s; 4 ranks on a 2-rank host:
  // the network is crossed, not judged.
  for (const Case c : {Case{"fast", 4096 * kMiB, 18, 2}, Case{"small", 16 * kMiB, 18, 2},
                       Case{"pcie", 1024 * kMiB, 0, 2}, Case{"multi-host", 64 * kMiB, 18, 4}}) {
    TempDir dir;
    for (int rank : {0, 1}) {
      RunSpec spec;
      spec.rank = rank;
      spec.topology = two_gpu_topology(c.nvlinks);
      spec.device = cuda_device(rank);
      spec.affinity = rank == 0 ? "0-47" : "48-95";
      spec.h2d_ms = 5;
      spec.coll_ms = 20;
      spec.coll_bytes = c.bytes;
      spec.nranks = c.nranks;
      write_run(dir.file("h1-r" + std::to_string(rank) + "-" + std::to_string(4242 + rank) + ".sst"),
                spec);
    }
    for (const auto& r : analyze(dir).ranks)
      BOOST_TEST(remedy(r, "collectives_below_link") == nullptr, c.what << " rank " << r.rank);
  }
}

BOOST_AUTO_TEST_SUITE_END()
