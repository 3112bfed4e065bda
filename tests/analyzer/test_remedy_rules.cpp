// Every rule of the remedy table (analyzer/src/remedy_table.cpp,
// docs/remedies.md) on hand-built ranks: one case that makes it fire, with
// its predicted step checked against the rule's model and its key inputs,
// and one near miss — the same run with the one piece of evidence the rule
// needs removed or just below its threshold — where it stays quiet. Each
// quiet case analyzes with every remedy kept (not the report's best five),
// so an absent id means the rule did not fire.
#include <algorithm>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "analyzer/remedy_runs.hpp"
#include "analyzer/report_lookup.hpp"
#include "remedy.hpp"  // order_remedies

using namespace stallscope::testing;
namespace an = stallscope::analyzer;
namespace tt = boost::test_tools;

namespace {

constexpr double kTol = 1e-6;  // relative

// Every remedy that fires, not only the report's best five.
an::RankReport analyze_all(const RankBuilder& b) {
  an::AnalyzeOptions o;
  o.max_remedies = 64;
  return b.analyze(o);
}

const an::Remedy& fired(const an::RankReport& r, const std::string& id) {
  const an::Remedy* m = remedy(r, id);
  BOOST_REQUIRE_MESSAGE(m != nullptr, id << " did not fire: " << r.summary);
  return *m;
}

bool quiet(const an::RankReport& r, const std::string& id) { return remedy(r, id) == nullptr; }

const an::Stage& stage_named(const an::RankReport& r, const std::string& name) {
  const an::Stage* s = stage(r, name);
  BOOST_REQUIRE_MESSAGE(s != nullptr, "no stage " << name);
  return *s;
}

// Mean ms per steady step.
double mean_ms(const an::RankReport& r, Part p) {
  return double(r.parts[an::idx(p)].total_ns) / 1e6 / double(r.steady_steps);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(remedy_rules)

// ---- raise_prefetch: data stall >= 5 %, every measured input stage keeps up

// The catalog: one rule per RemedyId, in its order, each with its own
// published key; input remedies are the ones the headspace ceiling caps.
BOOST_AUTO_TEST_CASE(the_catalog_has_one_rule_per_id_in_order) {
  const auto table = an::remedy_table();
  BOOST_REQUIRE_EQUAL(table.size(), an::kRemedyCount);
  std::vector<std::string> keys;
  for (size_t i = 0; i < table.size(); ++i) {
    BOOST_TEST(static_cast<size_t>(table[i]->id()) == i);
    keys.emplace_back(an::remedy_key(an::RemedyId(i)));
  }
  std::sort(keys.begin(), keys.end());
  BOOST_TEST((std::adjacent_find(keys.begin(), keys.end()) == keys.end()));
  BOOST_TEST(an::remedy_key(an::RemedyId::kMoreWorkers) == "more_workers");
  BOOST_TEST((an::remedy_family(an::RemedyId::kMoreWorkers) == an::RemedyFamily::kInput));
  BOOST_TEST((an::remedy_family(an::RemedyId::kPinnedMemory) == an::RemedyFamily::kCopy));
  BOOST_TEST((an::remedy_family(an::RemedyId::kHealthy) == an::RemedyFamily::kVerdict));
}

BOOST_AUTO_TEST_CASE(raise_prefetch_fires_when_stages_keep_up_yet_the_trainer_waits) {
  const auto r = analyze_all(late_batch(8));
  BOOST_TEST(r.steady_steps == 7u);
  const an::Remedy& m = fired(r, "raise_prefetch");
  BOOST_TEST(input(m, "data_stall_ms") == 12.0, tt::tolerance(kTol));
  // Preprocessing: 1 worker, 8 ms per batch = 125/s; storage: 4 ms = 250/s.
  BOOST_TEST(input(m, "slowest_stage_capacity") == 125.0, tt::tolerance(kTol));
  BOOST_TEST(stage_named(r, "storage").capacity == 250.0, tt::tolerance(kTol));
  BOOST_TEST(stage_named(r, "preprocessing").demand == 1000.0 / 88, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == std::max(100.0 - 12.0, 1000.0 / 125), tt::tolerance(kTol));
  BOOST_TEST(!m.bound);
}

BOOST_AUTO_TEST_CASE(raise_prefetch_stays_quiet_when_preprocessing_cannot_keep_up) {
  // The same 12 ms stall, but the worker preprocesses 96 ms per batch while
  // the trainer asks for one every 88 ms: a deeper queue would drain.
  const auto r = analyze_all(late_batch(96));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 12.0, tt::tolerance(kTol));
  BOOST_TEST(stage_named(r, "preprocessing").headroom() < 1.0);
  BOOST_TEST(quiet(r, "raise_prefetch"));
  // Idle CPUs (3 of 4): more workers instead, 100 - 12 * (1 - 1/4).
  BOOST_TEST(fired(r, "more_workers").predicted_step_ms == 91.0, tt::tolerance(kTol));
}

// ---- raise_queue_depth: storage >= 10 %, recorded mean queue depth < 64

BOOST_AUTO_TEST_CASE(raise_queue_depth_fires_on_shallow_reads_with_a_deeper_probe_point) {
  RankBuilder b = storage_bound({.bytes = 512 * kKiB, .queue_depth = 8});
  b.t.probes.queue_depth = 8;
  b.t.probes.storage = {{4, 512 * kKiB, 5e6}, {32, 512 * kKiB, 4e7}};
  const auto r = analyze_all(b);
  const an::Remedy& m = fired(r, "raise_queue_depth");
  const double bw = 512 * kKiB / kReadS;
  BOOST_TEST(m.inputs_from == "probe:storage");
  BOOST_TEST(input(m, "storage_stall_ms") == 60.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "mean_queue_depth") == 8.0);
  BOOST_TEST(input(m, "read_bandwidth") == bw, tt::tolerance(kTol));
  BOOST_TEST(input(m, "probe_queue_depth") == 32.0);
  BOOST_TEST(input(m, "probe_bandwidth") == 4e7);
  BOOST_TEST(m.predicted_step_ms == 100.0 - 60.0 * (1 - bw / 4e7), tt::tolerance(kTol));
  BOOST_TEST(!m.bound);
}

BOOST_AUTO_TEST_CASE(raise_queue_depth_stays_quiet_at_64_reads_in_flight) {
  RankBuilder b = storage_bound({.bytes = 512 * kKiB, .queue_depth = 64});
  b.t.probes.queue_depth = 64;
  b.t.probes.storage = {{128, 512 * kKiB, 4e7}};
  const auto r = analyze_all(b);
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == 60.0, tt::tolerance(kTol));
  BOOST_TEST(number(stage_named(r, "storage"), "mean_queue_depth") == 64.0);
  BOOST_TEST(quiet(r, "raise_queue_depth"));
}

BOOST_AUTO_TEST_CASE(raise_queue_depth_stays_quiet_when_reads_in_flight_never_reach_the_queue) {
  // Configured 32, 8 in flight on average: the prefetch depth limits them.
  RankBuilder b = storage_bound({.bytes = 512 * kKiB, .queue_depth = 8});
  b.t.probes.queue_depth = 32;
  b.t.probes.storage = {{32, 512 * kKiB, 4e7}};
  BOOST_TEST(quiet(analyze_all(b), "raise_queue_depth"));
}

// ---- direct_io: storage >= 10 %, mean read >= 1 MiB

BOOST_AUTO_TEST_CASE(direct_io_fires_on_large_reads) {
  const auto r = analyze_all(storage_bound({.bytes = 4 * kMiB}));
  const an::Remedy& m = fired(r, "direct_io");
  BOOST_TEST(m.bound);
  BOOST_TEST(m.inputs_from == "assumed");
  BOOST_TEST(input(m, "mean_read_bytes") == double(4 * kMiB));
  BOOST_TEST(input(m, "storage_stall_ms") == 60.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "copy_share") == 0.2);
  BOOST_TEST(m.predicted_step_ms == 100.0 - 0.2 * 60.0, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(direct_io_stays_quiet_on_reads_just_under_1_mib) {
  const auto r = analyze_all(storage_bound({.bytes = kMiB - 4 * kKiB}));
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == 60.0, tt::tolerance(kTol));
  BOOST_TEST(number(stage_named(r, "storage"), "mean_read_bytes") == double(kMiB - 4 * kKiB));
  BOOST_TEST(quiet(r, "direct_io"));
}

// ---- local_copy: storage >= 10 %, >= 50 % of bytes from network storage

BOOST_AUTO_TEST_CASE(local_copy_fires_on_network_reads_with_a_local_probe) {
  RankBuilder b = storage_bound({.bytes = 512 * kKiB}, kSteps);
  b.t.probes.local_bytes_per_s = 2e9;
  const auto r = analyze_all(b);
  const an::Remedy& m = fired(r, "local_copy");
  const double net_bw = 512 * kKiB / kReadS;
  BOOST_TEST(m.inputs_from == "probe:local_storage");
  BOOST_TEST(input(m, "network_bytes_share") == 1.0);
  BOOST_TEST(input(m, "network_bandwidth") == net_bw, tt::tolerance(kTol));
  BOOST_TEST(input(m, "local_bandwidth") == 2e9);
  BOOST_TEST(input(m, "storage_stall_ms") == 60.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 60.0 * (1 - net_bw / 2e9), tt::tolerance(kTol));
  BOOST_TEST(!m.bound);
}

BOOST_AUTO_TEST_CASE(local_copy_stays_quiet_when_most_bytes_are_local) {
  // 3 of the 8 reads (37.5 % of the bytes) from the network.
  RankBuilder b = storage_bound({.bytes = 512 * kKiB}, 3);
  b.t.probes.local_bytes_per_s = 2e9;
  const auto r = analyze_all(b);
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == 60.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "local_copy"));
}

// ---- pack_shards: storage >= 10 %, >= 50 % of reads < 256 KiB, >= 100 files

BOOST_AUTO_TEST_CASE(pack_shards_fires_on_small_reads_over_many_files) {
  const auto r = analyze_all(small_reads([](int i, int j) { return uint64_t(16 * i + j); }));
  const an::Remedy& m = fired(r, "pack_shards");
  BOOST_TEST(m.bound);
  BOOST_TEST(m.inputs_from == "assumed");
  BOOST_TEST(input(m, "files") == 128.0);
  BOOST_TEST(input(m, "small_read_share") == 1.0);
  BOOST_TEST(input(m, "storage_stall_ms") == 60.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 60.0, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(pack_shards_stays_quiet_when_the_small_reads_come_from_few_shards) {
  // The same 128 reads of 64 KiB, from 4 shard files.
  const auto r = analyze_all(small_reads([](int, int j) { return uint64_t(1 + j % 4); }));
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == 60.0, tt::tolerance(kTol));
  BOOST_TEST(number(stage_named(r, "storage"), "files") == 4.0);
  BOOST_TEST(quiet(r, "pack_shards"));
}

// ---- more_workers: preprocessing >= 10 %, >= 1 usable CPU idle during stalls

BOOST_AUTO_TEST_CASE(more_workers_fires_with_idle_cpus) {
  const auto r = analyze_all(preprocess_bound(3));
  const an::Remedy& m = fired(r, "more_workers");
  BOOST_TEST(input(m, "workers") == 1.0);
  BOOST_TEST(input(m, "idle_cpus_during_stalls") == 3.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "spare_cores") == 3.0, tt::tolerance(0.01));
  BOOST_TEST(input(m, "suggested_workers") == 4.0);
  BOOST_TEST(input(m, "preprocess_stall_ms") == 50.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 50.0 * (1 - 1.0 / 4), tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "cache_decoded"));
  // Not stallscope's loader (no loader configuration): loader.* would not
  // reach it, so no command to try.
  BOOST_TEST(try_of(r, m).empty(), try_of(r, m));
}

BOOST_AUTO_TEST_CASE(more_workers_on_stallscopes_loader_carries_the_setting_to_try) {
  auto b = preprocess_bound(3);
  b.t.probes.workers = 1;  // the loader's own configuration attachment
  b.t.procs[0].cmdline = {"./trainer", "--loader-workers=1"};
  const auto r = analyze_all(std::move(b));
  const an::Remedy& m = fired(r, "more_workers");
  BOOST_TEST(try_of(r, m) == "stallscope run --set loader.workers=4 -- ./trainer --loader-workers=1",
             try_of(r, m));
  BOOST_TEST(m.loader_knob.find("--loader-workers=4") != std::string::npos, m.loader_knob);
}

BOOST_AUTO_TEST_CASE(more_workers_stays_quiet_with_less_than_half_a_cpu_idle) {
  const auto r = analyze_all(preprocess_bound(0.4));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 50.0, tt::tolerance(kTol));
  BOOST_TEST(r.cpu.idle_during_stalls == 0.4, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "more_workers"));
  BOOST_TEST(fired(r, "cache_decoded").predicted_step_ms == 50.0, tt::tolerance(kTol));
}

// ---- cache_decoded: preprocessing >= 10 % and no usable CPU left

BOOST_AUTO_TEST_CASE(cache_decoded_fires_when_no_cpu_is_idle) {
  const auto r = analyze_all(preprocess_bound(0));
  const an::Remedy& m = fired(r, "cache_decoded");
  BOOST_TEST(m.bound);
  BOOST_TEST(input(m, "used_cores") == 1.0, tt::tolerance(0.01));
  BOOST_TEST(input(m, "budget_cores") == 4.0);
  BOOST_TEST(input(m, "idle_cpus_during_stalls") == 0.0);
  BOOST_TEST(input(m, "preprocess_stall_ms") == 50.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 50.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "cpu_contention_ms") == 0.0);
  // Its own CPU use is low: the evidence says others keep the CPUs busy.
  BOOST_TEST(m.evidence.find("busy with other processes or ranks") != std::string::npos,
             m.evidence);
  BOOST_TEST(quiet(r, "more_workers"));
}

// The rank's own processes fill its one CPU: its trainer, off CPU outside
// its waits, waits for the CPU its loading holds, which caching gives back
// too. (With the CPUs busy with other processes, as above, it does not
// count: that time is not the loading's to give back.)
BOOST_AUTO_TEST_CASE(cache_decoded_counts_the_trainers_wait_for_a_cpu_its_loading_holds) {
  RankBuilder b;
  b.t.procs[0].affinity_cpus = 1;
  for (int t = 0; t <= 100 * (kSteps + 1); t += 10)
    b.counter("cpu.idle", t, 0).counter("cpu.process_ns", t, t * 1e6).counter("cpu.thread_ns", t, 0, 100);
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).wait(s, s + 30, i).kernel(s + 30, s + 60);
    b.pre(w, s - 40, s + 30, uint64_t(i)).ready(w, s + 30, i, {uint64_t(i)});
  }
  const auto r = analyze_all(b);
  BOOST_TEST(mean_ms(r, Part::kHostBlocked) == 40.0, tt::tolerance(kTol));
  const an::Remedy& m = fired(r, "cache_decoded");
  BOOST_TEST(input(m, "cpu_contention_ms") == 40.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 30.0 - 40.0, tt::tolerance(kTol));
  BOOST_TEST(m.evidence.find("waits 40.00 ms per step for a CPU its loading holds") != std::string::npos,
             m.evidence);
  BOOST_TEST(quiet(r, "more_workers"));
}

BOOST_AUTO_TEST_CASE(cache_decoded_stays_quiet_with_one_cpu_idle) {
  const auto r = analyze_all(preprocess_bound(1.2));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 50.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "cache_decoded"));
  // One more worker: 100 - 50 * (1 - 1/2).
  BOOST_TEST(fired(r, "more_workers").predicted_step_ms == 75.0, tt::tolerance(kTol));
}

// ---- pinned_memory: exposed H2D >= 5 %, pageable bytes > pinned bytes

BOOST_AUTO_TEST_CASE(pinned_memory_fires_on_pageable_copies) {
  RankBuilder b = copies(20, 80'000'000, false);  // 4 GB/s
  b.t.probes.pinned_gbps = 24;
  const auto r = analyze_all(b);
  const an::Remedy& m = fired(r, "pinned_memory");
  BOOST_TEST(m.inputs_from == "probe:device_model");
  BOOST_TEST(input(m, "h2d_exposed_ms") == 20.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "pageable_bandwidth") == 4e9, tt::tolerance(kTol));
  BOOST_TEST(input(m, "pinned_bandwidth") == 24e9, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 20.0 * (1 - 4.0 / 24), tt::tolerance(kTol));
  BOOST_TEST(!m.bound);
  // The setting with its value: stallscope's loader's, and PyTorch's for a
  // DataLoader or for tensors copied outside one.
  BOOST_TEST(m.loader_knob == "--loader-pinned=on (or --set loader.pinned=true)");
  BOOST_TEST(m.pytorch_knob.find("DataLoader(pin_memory=True)") == 0u, m.pytorch_knob);
  BOOST_TEST(m.pytorch_knob.find("t.to(device, non_blocking=True)") != std::string::npos,
             m.pytorch_knob);
}

BOOST_AUTO_TEST_CASE(pinned_memory_stays_quiet_on_pinned_copies) {
  RankBuilder b = copies(20, 80'000'000, true);
  b.t.probes.pinned_gbps = 24;
  const auto r = analyze_all(b);
  BOOST_TEST(mean_ms(r, Part::kCopyH2D) == 20.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "pinned_memory"));
  BOOST_TEST(fired(r, "overlap_copies").predicted_step_ms == 80.0, tt::tolerance(kTol));
}

// ---- h2d_below_link: exposed H2D >= 5 %, pinned, < 50 % of the GPU's link

BOOST_AUTO_TEST_CASE(h2d_below_link_fires_on_pinned_copies_at_a_sixth_of_the_link) {
  RankBuilder b = copies(20, 200'000'000, true);  // 10 GB/s
  b.t.probes.gpus = {h200()};
  const auto r = analyze_all(b);
  const an::Remedy& m = fired(r, "h2d_below_link");
  BOOST_TEST(m.bound);
  BOOST_TEST(m.inputs_from == "topology");
  BOOST_TEST(input(m, "h2d_exposed_ms") == 20.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "pinned_bandwidth") == 10e9, tt::tolerance(kTol));
  BOOST_TEST(input(m, "link_bandwidth") == 63e9, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 20.0 * (1 - 10.0 / (0.8 * 63)), tt::tolerance(kTol));
  BOOST_TEST(m.evidence.find("NVIDIA H200, PCIe Gen5 x16, 63 GB/s") != std::string::npos,
             m.evidence);
  BOOST_TEST(quiet(r, "pinned_memory"));
}

BOOST_AUTO_TEST_CASE(h2d_below_link_stays_quiet_just_above_half_the_link) {
  RankBuilder b = copies(20, 640'000'000, true);  // 32 GB/s of 63
  b.t.probes.gpus = {h200()};
  const auto r = analyze_all(b);
  BOOST_TEST(number(stage_named(r, "h2d"), "pinned_bandwidth") == 32e9, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "h2d_below_link"));
  BOOST_TEST(fired(r, "overlap_copies").predicted_step_ms == 80.0, tt::tolerance(kTol));
}

// ---- numa_workers: < half of the allowed CPUs on the GPU's node, H2D + data >= 10 %

BOOST_AUTO_TEST_CASE(numa_workers_fires_when_most_allowed_cpus_are_on_the_far_node) {
  const auto r = analyze_all(numa_run("24-70"));  // 23 of 47 CPUs on node 1
  const an::Remedy& m = fired(r, "numa_workers");
  BOOST_TEST(m.inputs_from == "assumed");
  BOOST_TEST(input(m, "gpu_numa_node") == 1.0);
  BOOST_TEST(input(m, "allowed_cpus_on_gpu_node") == 100.0 * 23 / 47, tt::tolerance(kTol));
  BOOST_TEST(input(m, "h2d_exposed_ms") == 30.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "data_stall_ms") == 10.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 0.25 * 30 - 0.10 * 10, tt::tolerance(kTol));
  BOOST_TEST(m.loader_knob.find("--cpunodebind=1 --membind=1") != std::string::npos, m.loader_knob);
}

BOOST_AUTO_TEST_CASE(numa_workers_stays_quiet_with_half_the_allowed_cpus_on_the_gpu_node) {
  const auto r = analyze_all(numa_run("24-71"));  // 24 of 48
  BOOST_TEST(mean_ms(r, Part::kCopyH2D) == 30.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "numa_workers"));
  BOOST_TEST(fired(r, "overlap_copies").predicted_step_ms == 70.0, tt::tolerance(kTol));
}

// ---- overlap_copies: exposed copies >= 5 %, compute > 0

BOOST_AUTO_TEST_CASE(overlap_copies_fires_on_exposed_copies) {
  const auto r = analyze_all(copies(20, 1'000'000'000, true));
  const an::Remedy& m = fired(r, "overlap_copies");
  BOOST_TEST(input(m, "exposed_copies_ms") == 20.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "compute_ms") == 80.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - std::min(20.0, 80.0), tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(overlap_copies_stays_quiet_on_copies_under_5_percent) {
  const auto r = analyze_all(copies(4, 200'000'000, true));
  BOOST_TEST(mean_ms(r, Part::kCopyH2D) == 4.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "overlap_copies"));
  BOOST_TEST(input(fired(r, "healthy"), "compute_share") == 0.96, tt::tolerance(kTol));
}

// ---- overlap_comm: exposed transfer >= 10 %

BOOST_AUTO_TEST_CASE(overlap_comm_fires_on_exposed_collectives) {
  const auto r = analyze_all(exposed_comm(30));
  const an::Remedy& m = fired(r, "overlap_comm");
  BOOST_TEST(input(m, "exposed_transfer_ms") == 30.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "compute_ms") == 70.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "backward_share") == 2.0 / 3, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - std::min(30.0, 2.0 / 3 * 70), tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(overlap_comm_stays_quiet_under_10_percent) {
  const auto r = analyze_all(exposed_comm(9));
  BOOST_TEST(mean_ms(r, Part::kCommTransfer) == 9.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "overlap_comm"));
  BOOST_TEST(!quiet(r, "healthy"));
}

// ---- collectives_below_link: >= 3 large joined all-reduces on this host,
// ---- their bus bandwidth (90th percentile) < 1/3 of the link

BOOST_AUTO_TEST_CASE(collectives_below_link_fires_on_slow_all_reduces_over_nvlink) {
  const auto r = analyze_all(all_reduces(64 * kMiB));
  const an::Remedy& m = fired(r, "collectives_below_link");
  const double busbw = 64.0 * kMiB / 0.020;  // all-reduce on 2 ranks: bus factor 1
  BOOST_TEST(m.bound);
  BOOST_TEST(m.inputs_from == "topology");
  BOOST_TEST(input(m, "exposed_transfer_ms") == 20.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "bus_bandwidth_p90") == busbw, tt::tolerance(kTol));
  BOOST_TEST(input(m, "link_bandwidth") == 450e9);
  BOOST_TEST(m.predicted_step_ms == 100.0 - 20.0 * (1 - busbw / (0.8 * 450e9)),
             tt::tolerance(kTol));
  BOOST_TEST(m.evidence.find("18 NVLink links") != std::string::npos, m.evidence);
}

BOOST_AUTO_TEST_CASE(collectives_below_link_stays_quiet_near_half_the_link) {
  // 4 GiB in 20 ms: 215 GB/s, above a third of 450.
  const auto r = analyze_all(all_reduces(4096 * kMiB));
  BOOST_TEST(number(stage_named(r, "comm"), "large_bus_bandwidth") == 4096.0 * kMiB / 0.020,
             tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "collectives_below_link"));
  BOOST_TEST(fired(r, "overlap_comm").predicted_step_ms == 80.0, tt::tolerance(kTol));
}

// ---- avoid_sync: host after sync >= 10 %

BOOST_AUTO_TEST_CASE(avoid_sync_fires_when_the_device_idles_after_a_sync) {
  const auto r = analyze_all(synced(60));
  const an::Remedy& m = fired(r, "avoid_sync");
  BOOST_TEST(input(m, "host_after_sync_ms") == 30.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "host_launch_ms") == 5.0, tt::tolerance(kTol));
  // The 5 ms launch sits in a gap of its own (before the sync), so the
  // sync's gap keeps none of it: the whole 30 ms is recoverable.
  BOOST_TEST(input(m, "sync_gap_ms") == 30.0, tt::tolerance(kTol));
  BOOST_TEST(input(m, "sync_gap_launch_ms") == 0.0);
  BOOST_TEST(m.predicted_step_ms == 100.0 - 30.0, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(avoid_sync_stays_quiet_under_10_percent_after_syncs) {
  const auto r = analyze_all(synced(81));
  BOOST_TEST(mean_ms(r, Part::kHostAfterSync) == 9.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "avoid_sync"));
}

// ---- cuda_graphs: launch/API >= 10 %

BOOST_AUTO_TEST_CASE(cuda_graphs_fires_when_launches_keep_the_device_idle) {
  const auto r = analyze_all(launches(2));
  const an::Remedy& m = fired(r, "cuda_graphs");
  BOOST_TEST(m.bound);
  BOOST_TEST(m.inputs_from == "assumed");
  BOOST_TEST(input(m, "host_launch_ms") == 20.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 20.0, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(cuda_graphs_stays_quiet_under_10_percent_of_launches) {
  const auto r = analyze_all(launches(0.9));
  BOOST_TEST(mean_ms(r, Part::kHostLaunch) == 9.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "cuda_graphs"));
  BOOST_TEST(!quiet(r, "healthy"));  // compute 91 %
}

// ---- healthy: compute >= 90 %

BOOST_AUTO_TEST_CASE(healthy_fires_at_95_percent_compute_and_leads) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i)
    b.step(i, start_of(i), start_of(i) + 100).kernel(start_of(i), start_of(i) + 95);
  const auto r = analyze_all(b);
  BOOST_REQUIRE(!r.remedies.empty());
  const an::Remedy& m = r.remedies.front();
  BOOST_TEST(m.id == "healthy");
  BOOST_TEST(input(m, "compute_share") == 0.95, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == m.step_ms);
  BOOST_TEST(m.step_ms == 100.0, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(healthy_stays_quiet_at_89_percent_compute) {
  RankBuilder b;
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).kernel(s, s + 89).api(s + 89, s + 100);
  }
  const auto r = analyze_all(b);
  BOOST_TEST(r.parts[an::idx(Part::kCompute)].share == 0.89, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "healthy"));
  BOOST_TEST(fired(r, "cuda_graphs").predicted_step_ms == 89.0, tt::tolerance(kTol));
}

// ---- tune_dataloader: quiet on ranks whose stall is split or small; it
// ---- fires on an unsplit stall (below) and for profiler imports (tests/kineto).

BOOST_AUTO_TEST_CASE(tune_dataloader_stays_quiet_when_reads_and_preprocessing_explain_the_stall) {
  RankBuilder b;
  const uint32_t w = b.thread(200);
  for (int i = 1; i <= kSteps; ++i) {
    const double s = start_of(i);
    b.step(i, s, s + 100).wait(s, s + 30, i).kernel(s + 30, s + 100);
    b.read(w, s, s + 10, uint64_t(i))
        .pre(w, s + 10, s + 30, uint64_t(i))
        .ready(w, s + 30, i, {uint64_t(i)});
  }
  const auto r = analyze_all(b);
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == 10.0, tt::tolerance(kTol));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 20.0, tt::tolerance(kTol));
  BOOST_TEST(mean_ms(r, Part::kDataUnknown) == 0.0);
  BOOST_TEST(quiet(r, "tune_dataloader"));
}

BOOST_AUTO_TEST_CASE(tune_dataloader_stays_quiet_on_an_unsplit_stall_under_5_percent) {
  const auto r = analyze_all(unsplit_stall(4));
  BOOST_TEST(mean_ms(r, Part::kDataUnknown) == 4.0, tt::tolerance(kTol));
  BOOST_TEST(quiet(r, "tune_dataloader"));
}

// ---- "Not measured" is never read as "keeps up"; the CPU is a resource.

// Only storage was measured: "the input stages keep up" is not known when
// the stall is in preprocessing (read then handed over, no preprocess spans)
// or not split at all (reads outside the stall, no batch lineage).
BOOST_AUTO_TEST_CASE(raise_prefetch_abstains_when_preprocessing_was_not_measured) {
  for (const bool lineage : {true, false}) {
    RankBuilder b;
    const uint32_t w = b.thread(200);
    for (int i = 1; i <= kSteps; ++i) {
      const double s = start_of(i);
      b.step(i, s, s + 100).wait(s, s + 12, i).kernel(s + 12, s + 95);
      if (lineage)
        b.read(w, s, s + 2, uint64_t(i)).ready(w, s + 12, i, {uint64_t(i)});
      else
        b.read(w, s - 50, s - 48, uint64_t(i));
    }
    const auto r = analyze_all(b);
    BOOST_TEST_CONTEXT("lineage " << lineage) {
      BOOST_TEST(stage_named(r, "storage").measured);
      BOOST_TEST(!stage_named(r, "preprocessing").measured);
      BOOST_TEST(mean_ms(r, lineage ? Part::kDataPreprocess : Part::kDataUnknown) ==
                     (lineage ? 10.0 : 12.0),
                 tt::tolerance(kTol));
      BOOST_TEST(quiet(r, "raise_prefetch"));
    }
  }
}

BOOST_AUTO_TEST_CASE(tune_dataloader_fires_on_an_unsplit_stall_of_a_recorded_rank) {
  const auto r = analyze_all(unsplit_stall(30));
  BOOST_TEST(mean_ms(r, Part::kDataUnknown) == 30.0, tt::tolerance(kTol));
  const an::Remedy& m = fired(r, "tune_dataloader");
  BOOST_TEST(m.bound);
  BOOST_TEST(input(m, "data_stall_ms") == 30.0, tt::tolerance(kTol));
  BOOST_TEST(m.predicted_step_ms == 100.0 - 30.0, tt::tolerance(kTol));
}

// ---- the report's order: healthy first, then the gain; a bound's weighed down

namespace {
an::Remedy gain(const std::string& id, double predicted, bool bound) {
  an::Remedy m;
  m.kind = id == "healthy" ? an::RemedyId::kHealthy : an::RemedyId::kMoreWorkers;
  m.id = id;
  m.step_ms = 100.0;
  m.predicted_step_ms = predicted;
  m.bound = bound;
  return m;
}
std::string ids(const std::vector<an::Remedy>& v) {
  std::string s;
  for (const auto& m : v) s += (s.empty() ? "" : " ") + m.id;
  return s;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_measured_prediction_leads_a_bound_within_a_tenth_of_its_gain) {
  // A slow mount's small files: packing them (a bound, step - storage) and
  // more workers (measured) both reach about the compute floor; the bound's
  // 0.2 % more gain does not put it first.
  std::vector<an::Remedy> v = {gain("pack_shards", 20.20, true), gain("more_workers", 20.37, false)};
  an::order_remedies(v);
  BOOST_TEST(ids(v) == "more_workers pack_shards");
  // A bound well ahead (gain 60 against 40) stays first.
  v = {gain("more_workers", 60.0, false), gain("pack_shards", 40.0, true)};
  an::order_remedies(v);
  BOOST_TEST(ids(v) == "pack_shards more_workers");
  // Either side of the weight: 0.9 x 50 = 45 against 44 and 46.
  v = {gain("a", 56.0, false), gain("b", 50.0, true)};
  an::order_remedies(v);
  BOOST_TEST(ids(v) == "b a");
  v = {gain("a", 54.0, false), gain("b", 50.0, true)};
  an::order_remedies(v);
  BOOST_TEST(ids(v) == "a b");
  // Two bounds, or two measured: the gain alone; equal keys keep their order;
  // healthy leads whatever the others' gains.
  v = {gain("x", 70.0, true), gain("y", 60.0, true), gain("z", 60.0, true),
       gain("healthy", 100.0, false)};
  an::order_remedies(v);
  BOOST_TEST(ids(v) == "healthy y z x");
  // A bound that predicts a slower step is not weighed towards zero.
  v = {gain("worse_bound", 110.0, true), gain("worse", 105.0, false)};
  an::order_remedies(v);
  BOOST_TEST(ids(v) == "worse worse_bound");
  BOOST_TEST(an::order_gain_ms(gain("b", 50.0, true)) == 45.0, tt::tolerance(kTol));
  BOOST_TEST(an::order_gain_ms(gain("b", 110.0, true)) == -10.0, tt::tolerance(kTol));
}

// The CPU budget is a resource (RankReport::cpu), not an input stage.
BOOST_AUTO_TEST_CASE(cpu_is_no_stage) {
  const auto r = analyze_all(preprocess_bound(3));
  BOOST_TEST(r.cpu.known);
  BOOST_TEST(r.cpu.used_cores == 1.0, tt::tolerance(0.01));
  BOOST_TEST(stage(r, "cpu") == nullptr);
  BOOST_TEST(r.bottleneck != "cpu");
}

BOOST_AUTO_TEST_SUITE_END()
