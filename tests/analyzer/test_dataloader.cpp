// The PyTorch DataLoader seen through the hooks' records (issue #23): the
// per-loader model, the exact split of a wait, head-of-line waits, the
// remedy's setting with its value and site, several loaders, `set` marks
// and phases. Hand-computed traces, times in ms.
#include <algorithm>
#include <sstream>

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "analyzer/rank_builder.hpp"
#include "analyzer/report_lookup.hpp"
#include "capacity.hpp"
#include "loader_model.hpp"
#include "stallscope/analyzer/render.hpp"

using namespace stallscope::testing;
using stallscope::analyzer::DataLoaderReport;
using stallscope::analyzer::Part;
using stallscope::analyzer::RankReport;
using stallscope::analyzer::Remedy;
using stallscope::format::SamplePart;
namespace tt = boost::test_tools;

namespace {

constexpr double kTol = 1e-6;
constexpr uint64_t kTrain = 7, kVal = 9;
constexpr int kSteps = 12;

double mean_ms(const RankReport& r, Part p) {
  return r.steady_steps > 0
             ? double(r.parts[stallscope::analyzer::idx(p)].total_ns) / 1e6 / double(r.steady_steps)
             : -1;
}

void idle_cpus(RankBuilder& b, double until, double idle) {
  b.t.procs[0].affinity_cpus = 2;
  for (double t = 0; t <= until; t += 5) b.counter("cpu.idle", t, idle);
}

// One worker (pid 201) fetches batch i in [20i, 20i + 20): eight
// __getitem__ of 2 ms (a read of `read_ms` at the start of each), then a
// 3 ms collate, then 1 ms more. The trainer computes 10 ms per batch and
// waits for the rest: step i = [20i + 10.1, 20i + 30.1) (step 0 from 0),
// its wait until the batch arrives at 20i + 20.1 (0.1 ms hand-off).
RankBuilder one_worker(double read_ms,
                       stallscope::format::Tier tier = stallscope::format::Tier::kLocal,
                       double idle = 0.9) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py", "--epochs", "1"};
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < kSteps; ++i) {
    const double f = 20.0 * i;
    for (int k = 0; k < 8; ++k) {
      b.sample(w, f + 2 * k, f + 2 * k + 2, SamplePart::kGetItem, i);
      if (read_ms > 0) b.read(w, f + 2 * k, f + 2 * k + read_ms, 0, 0, 65536, tier);
    }
    b.sample(w, f + 16, f + 19, SamplePart::kCollate, i, 0, 0, 8);
    b.sample(w, f, f + 20, SamplePart::kFetch, i, 0, 0, 8);
    const double start = i == 0 ? 0 : f + 10.1;
    b.step(i, start, f + 30.1).wait(start, f + 20.1, i).kernel(f + 20.1, f + 30.1);
    b.handoff(start, f + 20.1, kTrain, i, 201);
  }
  idle_cpus(b, 20.0 * kSteps + 40, idle);
  return b;
}

// A worker that reads most of the time (issue #25): one worker process
// (pid 301) fetches batch i in [40i, 40i + 40), eight __getitem__ of 5 ms
// each opening with a read of `read_ms` from a network mount, and is on
// CPU `cpu_share` of its time (the sampler's process CPU). The trainer
// computes 5 ms per batch and waits the other 35 ms of each 40 ms step.
RankBuilder waiting_worker(double read_ms, double cpu_share, double idle) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w = b.worker_thread(301);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < kSteps; ++i) {
    const double f = 40.0 * i;
    for (int s = 0; s < 8; ++s) {
      b.sample(w, f + 5 * s, f + 5 * s + 5, SamplePart::kGetItem, i);
      b.read(w, f + 5 * s, f + 5 * s + read_ms, 0, 0, 65536, stallscope::format::Tier::kNetwork);
    }
    b.sample(w, f, f + 40, SamplePart::kFetch, i, 0, 0, 8);
    const double start = i == 0 ? 0 : f + 5.1;
    b.step(i, start, f + 45.1).wait(start, f + 40.1, i).kernel(f + 40.1, f + 45.1);
    b.handoff(start, f + 40.1, kTrain, i, 301);
  }
  const double end = 40.0 * kSteps + 40;
  idle_cpus(b, end, idle);
  for (double t = 0; t <= end; t += 5) b.counter("cpu.process_ns", t, t * cpu_share * 1e6, 0, w);
  return b;
}

// One worker fetches batch after batch of eight samples of 2 ms each, each
// reading its file /data/000K.z (K its place in the batch) for most of
// its time; the samples `slow` take 30 ms instead. The trainer computes
// 5 ms per batch and waits for the rest.
RankBuilder slow_tail(const std::vector<uint64_t>& slow) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int k = 0; k < 8; ++k) b.t.files.push_back("/data/000" + std::to_string(k) + ".z");
  double t = 0, trainer = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double f = t;
    for (int k = 0; k < 8; ++k) {
      const uint64_t idx = uint64_t(i) * 8 + uint64_t(k);
      const double d = std::find(slow.begin(), slow.end(), idx) != slow.end() ? 30 : 2;
      b.sample(w, t, t + d, SamplePart::kGetItem, i);
      b.t.events.back().sample().index = idx;
      b.read(w, t, t + 0.8 * d, 0, RankBuilder::ReadOpts{.file = uint64_t(k) + 1});
      t += d;
    }
    b.sample(w, f, t, SamplePart::kFetch, i, 0, 0, 8);
    b.step(i, trainer, t + 5.1).wait(trainer, t + 0.1, i).kernel(t + 0.1, t + 5.1);
    b.handoff(trainer, t + 0.1, kTrain, i, 201);
    trainer = t + 5.1;
  }
  idle_cpus(b, t + 40, 0.9);
  return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dataloader)

BOOST_AUTO_TEST_CASE(
    preprocessing_heavy_worker_is_split_exactly_and_more_workers_named_with_value_and_site) {
  const auto r = one_worker(0.2).analyze();
  // Wait [10.1, 20.1) of the fetch [0, 20): reads 0.1 + 0.2 + 0.2, collate
  // 3, the rest of the fetch 6.4 (preprocessing's part). The 0.1 ms from
  // the put to the receive runs while the worker reads for its next fetch:
  // the worker, never idle, is what the trainer waits for, so it is
  // storage. Only the last batch, with no fetch after it, has a hand-off.
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == (0.6 * 10 + 0.5) / 11, tt::tolerance(kTol));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 9.4, tt::tolerance(kTol));
  BOOST_TEST(mean_ms(r, Part::kDataHandoff) == 0.1 / 11, tt::tolerance(kTol));
  BOOST_TEST(mean_ms(r, Part::kDataUnknown) == 0.0);
  BOOST_TEST((r.split & stallscope::analyzer::kSplitExact) != 0);
  BOOST_TEST((r.split & stallscope::analyzer::kSplitInferred) == 0);
  BOOST_REQUIRE_EQUAL(r.dataloaders.size(), 1u);
  const DataLoaderReport& l = r.dataloaders[0];
  BOOST_TEST(l.site == "train.py:42");
  BOOST_TEST(l.num_workers == 1u);
  BOOST_TEST(l.fed_optimizer);
  BOOST_TEST(l.batches == uint64_t(kSteps));
  BOOST_TEST(l.fetch_ms == 20.0, tt::tolerance(kTol));
  BOOST_TEST(l.getitem_ms == 2.0, tt::tolerance(kTol));
  BOOST_TEST(l.collate_ms == 3.0, tt::tolerance(kTol));
  BOOST_TEST(l.handoff_ms == 0.1 / kSteps, tt::tolerance(kTol));
  BOOST_TEST(l.consume_ms == 10.0, tt::tolerance(kTol));
  BOOST_REQUIRE_EQUAL(l.workers.size(), 1u);
  BOOST_TEST(l.workers[0].pid == 201u);
  BOOST_TEST(l.workers[0].batches == uint64_t(kSteps));
  // Over the 11 steady waits of 10 ms and the first of 20.1 ms.
  BOOST_TEST(l.split.collate_ms == 3.0 * 11 + 3.0, tt::tolerance(kTol));
  BOOST_TEST(l.split.handoff_ms == 0.1, tt::tolerance(kTol));
  // The stages carry the loader's figures.
  const auto* pre =
      stallscope::analyzer::find_stage(r, stallscope::analyzer::StageKind::kPreprocess);
  BOOST_REQUIRE(pre != nullptr);
  BOOST_TEST(pre->figure(stallscope::analyzer::Fig::kWorkers).value_or(-1) == 1.0);
  BOOST_TEST(pre->figure(stallscope::analyzer::Fig::kFetchPerBatch).value_or(-1) == 20.0,
             tt::tolerance(kTol));
  const auto* co = stallscope::analyzer::find_stage(r, stallscope::analyzer::StageKind::kCollate);
  BOOST_TEST(co->measured);
  // 20 ms of fetch per 10 ms of trainer: two workers, which 0.9 idle CPUs allow.
  const Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=2) at train.py:42");
  BOOST_TEST(try_of(r, *m) ==
             "stallscope run --set 'dataloader[train.py:42].num_workers=2' -- python3 train.py "
             "--epochs 1");
  BOOST_TEST(m->predicted_step_ms == 10.0, tt::tolerance(1e-3));
  BOOST_TEST(r.remedies.front().id == "more_workers");
  BOOST_TEST(remedy(r, "tune_dataloader") == nullptr);
  // The CPUs leave room for the second worker: not "cache, no CPU left".
  BOOST_TEST(remedy(r, "cache_decoded") == nullptr);
}

BOOST_AUTO_TEST_CASE(reads_inside_samples_are_storage_remote_tier_included) {
  const auto r = one_worker(1.8, stallscope::format::Tier::kNetwork).analyze();
  // Wait [10.1, 20.1): reads [10.1, 11.8), [12, 13.8), [14, 15.8) = 5.3 ms,
  // and the 0.1 ms after the put, inside the next fetch's first read (but
  // for the last batch).
  BOOST_TEST(mean_ms(r, Part::kDataStorage) == (5.4 * 10 + 5.3) / 11, tt::tolerance(kTol));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 4.6, tt::tolerance(kTol));  // and 0.1 hand-off
  BOOST_TEST(r.dataloaders.at(0).split.storage_ms > r.dataloaders.at(0).split.preprocess_ms);
}

BOOST_AUTO_TEST_CASE(without_records_of_the_fetch_the_split_is_not_exact) {
  // The same trainer with its worker's file lost: no sample spans.
  RankBuilder full = one_worker(0.2), b;
  b.t = full.t;
  std::erase_if(b.t.events, [](const auto& e) { return e.kind == Kind::kSample; });
  const auto r = b.analyze();
  BOOST_TEST((r.split & stallscope::analyzer::kSplitExact) == 0);
  BOOST_TEST(r.dataloaders.at(0).unjoined_batches == uint64_t(kSteps));
  // tune_dataloader carries the setting: one more worker within 0.9 idle CPUs.
  const Remedy* m = remedy(r, "tune_dataloader");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=2) at train.py:42");
}

// No CPU idle during the stalls: more workers would only share busy CPUs
// (DESIGN.md), so no worker count is proposed, with records or without.
BOOST_AUTO_TEST_CASE(no_idle_cpu_no_more_workers) {
  const auto r = one_worker(0.2, stallscope::format::Tier::kLocal, 0.2).analyze();
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
  // Caching instead, naming the dataset, its item cost and the loader's line.
  const Remedy* c = remedy(r, "cache_decoded");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(c->pytorch_knob.find("cache MapDataset's decoded samples") == 0u, c->pytorch_knob);
  BOOST_TEST(c->pytorch_knob.find("__getitem__ takes 2.00 ms per sample, for the DataLoader at "
                                  "train.py:42") != std::string::npos,
             c->pytorch_knob);
  RankBuilder full = one_worker(0.2, stallscope::format::Tier::kLocal, 0.2), b;
  b.t = full.t;
  std::erase_if(b.t.events, [](const auto& e) { return e.kind == Kind::kSample; });
  const auto u = b.analyze();
  const Remedy* m = remedy(u, "tune_dataloader");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob.find("num_workers") == std::string::npos, m->pytorch_knob);
  BOOST_TEST(try_of(r, *m).empty());
  BOOST_TEST(m->loader_knob.find("12 of the DataLoader's 12 batches") == 0u, m->loader_knob);
}

// Waits of 10 ms against a 5 ms idle counter read as a mix of the wait and
// the work around it (0.4 idle CPUs where one sat idle). The steps' mean
// idle (0.2) and the rank's own 1.8 cores leave nothing to other processes:
// during a wait the rank runs only its one fetching worker, so a CPU is
// idle, and the second worker is proposed.
BOOST_AUTO_TEST_CASE(idle_cpus_during_short_waits_count_what_others_leave_beyond_the_fetching_workers) {
  auto run = [](double own_cores) {
    RankBuilder b = one_worker(0.2, stallscope::format::Tier::kLocal, 0.4);
    std::erase_if(b.t.events, [](const auto& e) { return e.kind == Kind::kCounter; });
    for (double t = 0; t <= 20.0 * kSteps + 40; t += 5) {
      const int phase = int(t) % 20;  // the waits are [20i + 10.1, 20i + 20.1)
      b.counter("cpu.idle", t, phase == 15 || phase == 0 ? 0.4 : 0.0);
      b.counter("cpu.process_ns", t, t * own_cores * 1e6);
    }
    return b.analyze();
  };
  const auto r = run(1.8);
  BOOST_TEST(r.cpu.idle_during_stalls < 0.5);
  BOOST_TEST(r.cpu.idle_in_steps == 0.2, tt::tolerance(0.05));
  const Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=2) at train.py:42");
  BOOST_TEST(remedy(r, "cache_decoded") == nullptr);
  // The near miss: other processes took 0.6 of a core all along.
  const auto q = run(1.2);
  BOOST_TEST(remedy(q, "more_workers") == nullptr);
}

// Two ranks share the node's 2 CPUs: idle CPUs this rank's budget (1 core,
// 0.9 of it used) does not leave it are no room for another worker. Alone on
// the node, the same use leaves the idle CPU to it.
BOOST_AUTO_TEST_CASE(idle_cpus_beyond_the_rank_budget_are_no_room_for_workers) {
  RankBuilder b = one_worker(0.2);
  for (double t = 0; t <= 280; t += 5) b.counter("cpu.process_ns", t, 0.9e6 * t);
  b.t.probes.ranks_on_node = 2;
  const auto r = b.analyze();
  BOOST_TEST(r.cpu.budget_cores == 1.0, tt::tolerance(1e-6));
  BOOST_TEST(r.cpu.used_cores == 0.9, tt::tolerance(1e-6));
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
  b.t.probes.ranks_on_node = 1;
  BOOST_TEST(remedy(b.analyze(), "more_workers") != nullptr);
}

// Batches made in 2 ms that take 8 ms to reach the trainer: the waits are
// hand-offs — neither caching samples nor more workers is the remedy.
BOOST_AUTO_TEST_CASE(handoff_bound_waits_propose_no_cache_and_no_workers) {
  RankBuilder b;
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i;
    b.sample(w, s, s + 2, SamplePart::kFetch, i);
    b.step(i, s, s + 20)
        .wait(s, s + 10, i)
        .kernel(s + 10, s + 20)
        .handoff(s, s + 10, kTrain, i, 201);
  }
  idle_cpus(b, 20.0 * kSteps + 20, 0.2);
  const auto r = b.analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.split.handoff_ms == 8.0 * kSteps, tt::tolerance(kTol));
  BOOST_TEST(l.handoff_ms == 8.0, tt::tolerance(kTol));
  const auto* tl =
      stallscope::analyzer::find_stage(r, stallscope::analyzer::StageKind::kTrainerLoad);
  BOOST_TEST(tl->figure(stallscope::analyzer::Fig::kHandoffPerBatch).value_or(-1) == 8.0,
             tt::tolerance(kTol));
  // The hand-off is its own part: caching could shorten the 2 ms fetch at
  // most (the CPUs are busy), more workers or depth nothing.
  BOOST_TEST(mean_ms(r, Part::kDataHandoff) == 8.0, tt::tolerance(kTol));
  if (const Remedy* c = remedy(r, "cache_decoded"))
    BOOST_TEST(c->step_ms - c->predicted_step_ms <= 2.0 + kTol);
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
  BOOST_TEST(remedy(r, "raise_prefetch") == nullptr);  // the waits are hand-offs, not late fetches
}

namespace {
// The hand-off-bound loader above (2 ms fetch, 8 ms from put to receive),
// with the hooks' guard-rail marks: its sharing strategy and the first
// batch's tensors.
RankReport handoff_run(const std::string& sharing, int tensors) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  b.mark("dataloader env loader=7 shm_free=1000000000 sharing=" + sharing, 0.5);
  b.mark("dataloader batch loader=7 bytes=4194304 tensors=" + std::to_string(tensors), 10);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i;
    b.sample(w, s, s + 2, SamplePart::kFetch, i);
    b.step(i, s, s + 20).wait(s, s + 10, i).kernel(s + 10, s + 20).handoff(s, s + 10, kTrain, i, 201);
  }
  idle_cpus(b, 20.0 * kSteps + 20, 0.2);
  return b.analyze();
}
}  // namespace

// The hand-off is its own part: the 8 ms after the put are data.handoff,
// the 2 ms fetch preprocessing; the verdict names the hand-off and the
// first remedy is the file_system strategy, a bound at the whole hand-off,
// with the --set that tries it.
BOOST_AUTO_TEST_CASE(a_handoff_bound_loader_gets_the_file_system_sharing_strategy) {
  const RankReport r = handoff_run("file_descriptor", 16);
  BOOST_TEST(mean_ms(r, Part::kDataHandoff) == 8.0, tt::tolerance(0.01));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 2.0, tt::tolerance(0.01));
  BOOST_TEST(r.cause.find("input-bound: hand-off") == 0, r.cause);
  BOOST_REQUIRE(!r.remedies.empty());
  const Remedy& m = r.remedies.front();
  BOOST_TEST(m.id == "sharing_strategy");
  BOOST_TEST(m.bound);
  BOOST_TEST(m.step_ms - m.predicted_step_ms == 8.0, tt::tolerance(0.01));
  BOOST_TEST(m.pytorch_knob.find("set_sharing_strategy('file_system')") != std::string::npos,
             m.pytorch_knob);
  BOOST_TEST(m.pytorch_knob.find("train.py:42") != std::string::npos, m.pytorch_knob);
  BOOST_TEST(try_of(r, m).find("dataloader[train.py:42].sharing_strategy=file_system") !=
                 std::string::npos,
             try_of(r, m));
  BOOST_TEST(m.evidence.find("16 tensors per batch") != std::string::npos, m.evidence);
}

// Two workers, 30 ms a batch each, batch i on worker i % 2 in
// [20i, 20i + 30), received 8 ms after its put (the worker idle by then);
// the trainer computes 2 ms: steps of 20 ms, each wait 10 ms of fetch and
// 8 ms of hand-off. Without the hand-off the workers still take 15 ms a
// batch between them: the prediction is 15 ms, not 20 - 8.
BOOST_AUTO_TEST_CASE(the_sharing_strategy_predicts_no_step_below_what_the_workers_take) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w[2] = {b.worker_thread(201), b.worker_thread(202)};
  b.loader_config(0, kTrain, 2);
  b.mark("dataloader env loader=7 shm_free=1000000000 sharing=file_descriptor", 0.5);
  b.mark("dataloader batch loader=7 bytes=4194304 tensors=16", 1);
  double t = 0;
  for (int i = 0; i < 2 * kSteps; ++i) {
    const double f = 20.0 * i, received = f + 38;
    b.sample(w[i % 2], f, f + 30, SamplePart::kFetch, uint64_t(i), 0, i % 2);
    b.step(i, t, received + 2).wait(t, received, uint64_t(i)).kernel(received, received + 2);
    b.handoff(t, received, kTrain, uint64_t(i), 201 + uint32_t(i % 2), i % 2);
    t = received + 2;
  }
  idle_cpus(b, t + 40, 0.2);
  const RankReport r = b.analyze();
  BOOST_TEST(mean_ms(r, Part::kDataHandoff) == 8.0, tt::tolerance(0.01));
  const Remedy* m = remedy(r, "sharing_strategy");
  BOOST_TEST_REQUIRE(m != nullptr);
  BOOST_TEST(m->predicted_step_ms == 15.0, tt::tolerance(0.01));
  BOOST_TEST(m->model.find("num_workers") != std::string::npos, m->model);
}

// Already on file_system, or one tensor per batch: considered, not proposed.
BOOST_AUTO_TEST_CASE(the_sharing_strategy_is_rejected_where_descriptors_are_not_the_cost) {
  for (const auto& [sharing, tensors, why] :
       {std::tuple{std::string("file_system"), 16, "already uses the file_system strategy"},
        std::tuple{std::string("file_descriptor"), 1, "a batch holds 1 tensor(s)"}}) {
    const RankReport r = handoff_run(sharing, tensors);
    BOOST_TEST(remedy(r, "sharing_strategy") == nullptr);
    const auto it = std::find_if(r.rejected_remedies.begin(), r.rejected_remedies.end(),
                                 [](const auto& x) { return x.id == "sharing_strategy"; });
    BOOST_REQUIRE(it != r.rejected_remedies.end());
    BOOST_TEST(it->reason.find(why) != std::string::npos, it->reason);
  }
}

// Two workers keep up on average (15 ms a batch each, one batch per 20 ms
// step) yet each batch starts late: deeper prefetch, with its value and site.
// Of each 5.1 ms wait, 5 ms are the worker's fetch (the rest its hand-off,
// which no depth shortens): producers making a batch every 7.5 ms are 0.67
// of a batch short, made up within the step, so one batch more in flight:
// prefetch_factor 2 + ceil(1 / 2 workers) = 3.
BOOST_AUTO_TEST_CASE(workers_that_keep_up_on_average_get_a_deeper_prefetch) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w[2] = {b.worker_thread(201), b.worker_thread(202)};
  b.loader_config(0, kTrain, 2);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i + 20;
    b.sample(w[i % 2], s - 10, s + 5, SamplePart::kFetch, i, 0, i % 2);
    b.step(i, s, s + 20).wait(s, s + 5.1, i).kernel(s + 5.1, s + 20);
    b.handoff(s, s + 5.1, kTrain, i, i % 2 == 0 ? 201 : 202, i % 2);
  }
  idle_cpus(b, 20.0 * kSteps + 40, 0.9);
  const auto r = b.analyze();
  BOOST_TEST(remedy(r, "more_workers") == nullptr);  // 2 workers are enough
  const Remedy* m = remedy(r, "raise_prefetch");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(input(*m, "peak_deficit_batches") == 5.0 / 7.5, tt::tolerance(kTol));
  BOOST_TEST(input(*m, "extra_batches") == 1.0);
  BOOST_TEST(m->pytorch_knob == "DataLoader(prefetch_factor=3) at train.py:42");
  BOOST_TEST(
      try_of(r, *m) ==
      "stallscope run --set 'dataloader[train.py:42].prefetch_factor=3' -- python3 train.py");
}

// A burst: three steps in a row wait 30 ms each for producers that make a
// batch every 7.5 ms and gain 20 / 7.5 - 1 = 1.67 batches per 20 ms of
// work: the deficit peaks at 4 + 2.33 + 2.33 = 8.67 batches, so 9 more
// batches in flight: prefetch_factor 2 + ceil(9 / 2) = 7.
BOOST_AUTO_TEST_CASE(a_burst_of_stalls_sizes_the_prefetch_depth) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w[2] = {b.worker_thread(201), b.worker_thread(202)};
  b.loader_config(0, kTrain, 2);
  double s = 20;
  for (int i = 0; i < 2 * kSteps; ++i) {
    const bool burst = i >= 12 && i < 15;
    const double wait = burst ? 30 : 0.0;
    b.sample(w[i % 2], s + wait - 15, s + wait, SamplePart::kFetch, i, 0, i % 2);
    b.step(i, s, s + wait + 20).kernel(s + wait, s + wait + 20);
    if (burst) b.wait(s, s + wait, i);
    b.handoff(s, s + std::max(wait, 0.01), kTrain, i, i % 2 == 0 ? 201 : 202, i % 2);
    s += wait + 20;
  }
  idle_cpus(b, s + 20, 0.9);
  const auto r = b.analyze();
  const Remedy* m = remedy(r, "raise_prefetch");
  BOOST_REQUIRE_MESSAGE(m != nullptr, r.summary);
  BOOST_TEST(input(*m, "peak_deficit_batches") == 4 + 2 * (4 - (20 / 7.5 - 1)), tt::tolerance(0.02));
  BOOST_TEST(input(*m, "extra_batches") == 9.0);
  BOOST_TEST(m->pytorch_knob == "DataLoader(prefetch_factor=7) at train.py:42");
  BOOST_TEST(m->evidence.find("longest burst: 3 stalled step(s), 90.0 ms") != std::string::npos,
             m->evidence);
}

// Pageable copies from a DataLoader that asked for pin_memory=True which
// torch turned off: the remedy names the setting, the site, and says so.
BOOST_AUTO_TEST_CASE(pageable_copies_name_pin_memory_at_the_site) {
  RankBuilder b = one_worker(0.2);
  b.t.events.front().loader().pin_memory = stallscope::format::PinMemory::kInactive;
  for (int i = 1; i < kSteps; ++i) {
    const double f = 20.0 * i;
    b.copy(Kind::kH2D, f + 12, f + 14, 8 << 20, /*pinned=*/false);  // the device idle: exposed
  }
  const auto r = b.analyze();
  const Remedy* m = remedy(r, "pinned_memory");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(pin_memory=True) at train.py:42");
  BOOST_TEST(
      try_of(r, *m).find("--set 'dataloader[train.py:42].pin_memory=true'") != std::string::npos,
      try_of(r, *m));
  BOOST_TEST(m->evidence.find("torch turned it off") != std::string::npos, m->evidence);
}

// The DataLoader pins its batches, yet the copies are pageable: other
// tensors. pin_memory=True again would change nothing: the tensors' own
// setting, no `try`.
BOOST_AUTO_TEST_CASE(pageable_copies_beside_a_pinning_dataloader_name_the_tensors_setting) {
  RankBuilder b = one_worker(0.2);
  b.t.events.front().loader().pin_memory = stallscope::format::PinMemory::kOn;
  for (int i = 1; i < kSteps; ++i) {
    const double f = 20.0 * i;
    b.copy(Kind::kH2D, f + 12, f + 14, 8 << 20, /*pinned=*/false);
  }
  const auto r = b.analyze();
  const Remedy* m = remedy(r, "pinned_memory");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob.find("DataLoader(pin_memory=True)") == std::string::npos,
             m->pytorch_knob);
  BOOST_TEST(m->pytorch_knob.find("t.pin_memory() and t.to(device, non_blocking=True)") !=
                 std::string::npos,
             m->pytorch_knob);
  BOOST_TEST(try_of(r, *m).empty(), try_of(r, *m));
  BOOST_TEST(m->evidence.find("not its batches") != std::string::npos, m->evidence);
}

BOOST_AUTO_TEST_CASE(ready_batches_behind_a_late_one_are_head_of_line_waits) {
  RankBuilder b;
  const uint32_t w0 = b.worker_thread(201), w1 = b.worker_thread(202);
  b.loader_config(0, kTrain, 2);
  // Batch 0 (worker 0) takes 30 ms; batch 1 (worker 1) is put at 5 and
  // received during the wait for batch 0; batch 2 (worker 0) is put at 35,
  // asked for at 50.2 and received only at 52.
  b.sample(w0, 0, 30, SamplePart::kFetch, 0).sample(w1, 0, 5, SamplePart::kFetch, 1, 0, 1);
  b.sample(w0, 30, 35, SamplePart::kFetch, 2);
  b.step(0, 0, 40.1).wait(0, 30.1, 0).kernel(30.1, 40.1).handoff(0, 30.1, kTrain, 0, 201);
  b.handoff(40.1, 5.1, kTrain, 1, 202, 1);
  b.step(1, 40.1, 50.2).wait(40.1, 40.2, 1).kernel(40.2, 50.2);
  b.step(2, 50.2, 62).wait(50.2, 52, 2).kernel(52, 62).handoff(50.2, 52, kTrain, 2, 201);
  const auto r = b.analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.batches == 3u);
  // Wait 0: batch 1 sat ready from 5 to 30.1; batch 0's 0.1 ms from put to
  // receive ran beside worker 0's next fetch (preprocessing's). Waits 1 and
  // 2 are on batches put before they were asked for: one hand-off each
  // (0.1 ms, batch 0's put to receive), and wait 2's 1.7 ms beyond it
  // head-of-line.
  BOOST_TEST(l.head_of_line_waits == 2u);
  BOOST_TEST(l.head_of_line_ready_ms == 25.1, tt::tolerance(kTol));
  BOOST_TEST(l.split.head_of_line_ms == 1.7, tt::tolerance(kTol));
  BOOST_TEST(l.split.preprocess_ms == 30.1, tt::tolerance(kTol));
  BOOST_TEST(l.split.handoff_ms == 0.2, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(loading_on_the_trainer_thread_proposes_workers_never_prefetch) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  b.loader_config(0, kTrain, 0);
  // num_workers=0: the fetch (15 ms: eight 1.5 ms items, a 2 ms collate)
  // runs on the trainer inside its wait; then 10 ms of compute.
  for (int i = 0; i < kSteps; ++i) {
    const double s = 25.2 * i;
    for (int k = 0; k < 8; ++k)
      b.sample(b.trainer, s + 1.5 * k, s + 1.5 * k + 1.5, SamplePart::kGetItem, i, kTrain, -1);
    b.sample(b.trainer, s + 12, s + 14, SamplePart::kCollate, i, kTrain, -1, 8);
    b.sample(b.trainer, s, s + 15, SamplePart::kFetch, i, kTrain, -1, 8);
    b.step(i, s, s + 25.2).wait(s, s + 15.2, i).kernel(s + 15.2, s + 25.2);
  }
  idle_cpus(b, 25.2 * kSteps + 30, 1.5);
  const auto r = b.analyze();
  BOOST_TEST((r.split & stallscope::analyzer::kSplitExact) != 0);
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) == 15.2, tt::tolerance(kTol));
  const auto* tl =
      stallscope::analyzer::find_stage(r, stallscope::analyzer::StageKind::kTrainerLoad);
  BOOST_TEST(tl->measured);
  BOOST_TEST(tl->busy_per_item_ms == 15.0, tt::tolerance(kTol));
  BOOST_TEST(remedy(r, "raise_prefetch") == nullptr);
  for (const auto& m : r.remedies)
    BOOST_TEST(m.pytorch_knob.find("prefetch") == std::string::npos, m.id);
  // 15 ms of fetch per 10 ms of trainer: two workers; 1.5 idle CPUs allow them.
  const Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=2) at train.py:42");
  BOOST_TEST(try_of(r, *m) ==
             "stallscope run --set 'dataloader[train.py:42].num_workers=2' -- python3 train.py");
  BOOST_TEST(m->bound);
}

BOOST_AUTO_TEST_CASE(train_loader_inside_steps_fed_the_optimizer_not_the_validation_one) {
  RankBuilder b;
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1, "src/train.py:42");
  b.mark("set applied dataloader.num_workers=1 at src/train.py:42 (was 0)", 0.01);
  b.mark("set unmatched dataloader[val.py:9].pin_memory=true: no DataLoader built at val.py:9",
         0.02);
  b.mark("settings are fine", 0.03);  // not a `set` mark
  for (int i = 0; i < 5; ++i) {
    const double s = 20.0 * i;
    b.sample(w, s, s + 8, SamplePart::kFetch, i);
    b.step(i, s, s + 20)
        .wait(s, s + 8.1, i)
        .kernel(s + 8.1, s + 20)
        .handoff(s, s + 8.1, kTrain, i, 201);
  }
  // Validation after the steps, on the trainer thread (num_workers=0), in a phase:eval range.
  b.loader_config(100, kVal, 0, "val.py:9");
  b.range("phase:eval", b.trainer, 100, 150);
  for (int i = 0; i < 5; ++i) {
    const double s = 100 + 10.0 * i;
    b.sample(b.trainer, s, s + 6, SamplePart::kFetch, i, kVal, -1)
        .wait(s, s + 6, i)
        .kernel(s + 6, s + 10);
  }
  const auto r = b.analyze();
  BOOST_TEST(r.steps.size() == 5u);  // the evaluation loop is no step
  BOOST_REQUIRE_EQUAL(r.phases.size(), 1u);
  BOOST_TEST(r.phases[0].name == "eval");
  BOOST_TEST(r.phases[0].count == 1u);
  BOOST_TEST(r.phases[0].total_ms == 50.0, tt::tolerance(kTol));
  BOOST_REQUIRE_EQUAL(r.dataloaders.size(), 2u);
  BOOST_TEST(r.dataloaders[0].site == "src/train.py:42");
  BOOST_TEST(r.dataloaders[0].fed_optimizer);
  BOOST_TEST(r.dataloaders[0].waits_in_steps == 5u);
  BOOST_TEST(r.dataloaders[1].site == "val.py:9");
  BOOST_TEST(!r.dataloaders[1].fed_optimizer);
  BOOST_TEST(r.dataloaders[1].waits == 5u);
  BOOST_TEST(r.dataloaders[1].waits_in_steps == 0u);
  BOOST_TEST(r.dataloaders[1].fetch_ms == 6.0, tt::tolerance(kTol));
  BOOST_REQUIRE_EQUAL(r.settings.size(), 2u);
  BOOST_TEST(r.settings[0].status == "applied");
  BOOST_TEST(r.settings[0].key == "dataloader.num_workers");
  BOOST_TEST(r.settings[0].value == "1");
  BOOST_TEST(r.settings[0].site == "src/train.py:42");
  BOOST_TEST(r.settings[0].detail == "was 0");
  BOOST_TEST(r.settings[1].status == "unmatched");
  BOOST_TEST(r.settings[1].key == "dataloader[val.py:9].pin_memory");
  BOOST_TEST(r.settings[1].site == "");
  BOOST_TEST(r.settings[1].detail == "no DataLoader built at val.py:9");
  // The reports show them.
  stallscope::analyzer::Report rep;
  rep.ranks.push_back(r);
  std::ostringstream text, json;
  stallscope::analyzer::write_text(text, rep, {});
  stallscope::analyzer::write_json(json, rep);
  BOOST_TEST(
      text.str().find("DataLoader at src/train.py:42 (fed the optimizer)") != std::string::npos,
      text.str());
  BOOST_TEST(
      text.str().find(
          "settings tried:\n  applied dataloader.num_workers=1 at src/train.py:42 (was 0)") !=
      std::string::npos);
  BOOST_TEST(text.str().find("phases (outside steps): eval 1x, 50.0 ms in all") !=
             std::string::npos);
  const auto j = nlohmann::json::parse(json.str());
  BOOST_TEST(j["schema_minor"].get<int>() == stallscope::analyzer::kSchemaMinor);
  const auto& jr = j["ranks"][0];
  BOOST_TEST(jr["dataloaders"].size() == 2u);
  BOOST_TEST(jr["dataloaders"][1]["fed_optimizer"].get<bool>() == false);
  BOOST_TEST(jr["settings"][1]["status"].get<std::string>() == "unmatched");
  BOOST_TEST(jr["phases"][0]["count"].get<int>() == 1);
}

// Without persistent_workers every epoch starts new worker processes: each
// iterator's start-up runs from its creation to its first batch.
BOOST_AUTO_TEST_CASE(each_epoch_start_up_and_workers_started_again_without_persistent_workers) {
  RankBuilder b;
  const uint32_t w0 = b.worker_thread(201), w1 = b.worker_thread(202);
  b.loader_config(0, kTrain, 1);
  b.loader_config(100, kTrain, 1, "train.py:42", 1);
  for (int e = 0; e < 2; ++e) {
    const double t0 = 100.0 * e + 30;  // the new workers' first fetch ends 30 ms after the iterator
    for (int i = 0; i < 3; ++i) {
      const double s = t0 + 20.0 * i;
      b.sample(e == 0 ? w0 : w1, s - 10, s, SamplePart::kFetch, i);
      const double asked = i == 0 ? 100.0 * e + 1 : s - 10;
      b.step(3 * e + i, asked, s + 10).wait(asked, s + 0.5, i).kernel(s + 0.5, s + 10);
      b.handoff(asked, s + 0.5, kTrain, i, e == 0 ? 201 : 202, 0, uint32_t(e));
    }
  }
  const auto r = b.analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.generations == 2u);
  BOOST_REQUIRE_EQUAL(l.epochs.size(), 2u);
  BOOST_TEST(l.epochs[0].startup_ms == 30.5, tt::tolerance(kTol));
  BOOST_TEST(l.epochs[1].startup_ms == 30.5, tt::tolerance(kTol));
  BOOST_TEST(l.epochs[1].workers_started);
  BOOST_TEST(l.workers.size() == 2u);  // two worker processes, one per epoch
  stallscope::analyzer::Report rep;
  rep.ranks.push_back(r);
  std::ostringstream text;
  stallscope::analyzer::write_text(text, rep, {});
  BOOST_TEST(
      text.str().find("epochs 2: start-up 30.5 ms, 30.5 ms (workers started again every epoch: "
                      "persistent_workers is off)") != std::string::npos,
      text.str());
}

namespace {

// Four epochs of four batches, two workers started anew for each (pids 201 +
// 2e, 202 + 2e) unless `persistent`: epoch e's iterator is made at 300e; its
// workers' first fetches run [300e + 150, +160) (150 ms of start-up each
// epoch without persistent workers, 0 with them after the first), later
// batches are ready before the trainer asks; the trainer computes 20 ms per
// batch and waits 0.5 ms for a ready one.
RankBuilder short_epochs(bool persistent) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  uint32_t w[2] = {};
  for (int e = 0; e < 4; ++e) {
    const double t0 = 300.0 * e;
    const bool started = e == 0 || !persistent;
    if (started) w[0] = b.worker_thread(201 + 2 * e), w[1] = b.worker_thread(202 + 2 * e);
    const uint32_t pid0 = b.t.tracks[w[0]].tid, pid1 = b.t.tracks[w[1]].tid;
    b.loader_config(t0, kTrain, 2, "train.py:42", uint32_t(e)).persistent_workers = persistent;
    const double first = started ? t0 + 160 : t0 + 11;  // the first batch's put
    for (int i = 0; i < 4; ++i) {
      const double put = first + 10.0 * (i / 2);
      b.sample(w[i % 2], put - 10, put, SamplePart::kFetch, i, 0, i % 2);
      const double asked = i == 0 ? t0 + 1 : first + 0.5 + 20.0 * i;
      const double got = std::max(asked, put) + 0.5;
      b.step(4 * e + i, asked, got + 19.5).wait(asked, got, i).kernel(got, got + 19.5);
      b.handoff(asked, got, kTrain, i, i % 2 == 0 ? pid0 : pid1, i % 2, uint32_t(e));
    }
  }
  idle_cpus(b, 1200, 1.0);
  return b;
}

}  // namespace

// Without persistent_workers each epoch's workers start again while the
// trainer waits: keeping them saves each later epoch's first wait beyond
// one batch's fetch, spread over the steady steps; deeper prefetch or more
// workers would not shorten those waits.
BOOST_AUTO_TEST_CASE(workers_started_again_every_short_epoch_propose_persistent_workers) {
  const auto r = short_epochs(false).analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_REQUIRE_EQUAL(l.epochs.size(), 4u);
  BOOST_TEST(l.epochs[1].startup_ms == 160.5, tt::tolerance(kTol));
  BOOST_TEST(l.epochs[1].first_wait_ms == 159.5, tt::tolerance(kTol));
  BOOST_REQUIRE_EQUAL(r.steady_steps, 15u);  // step 0 is warm-up
  const Remedy* m = remedy(r, "persistent_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(r.remedies.front().id == "persistent_workers");
  BOOST_TEST(m->pytorch_knob == "DataLoader(persistent_workers=True) at train.py:42");
  BOOST_TEST(try_of(r, *m) ==
             "stallscope run --set 'dataloader[train.py:42].persistent_workers=true' -- python3 "
             "train.py");
  // Three restarts of 159.5 ms waits, each keeping a 10 ms fetch, over 15 steps.
  BOOST_TEST(m->step_ms - m->predicted_step_ms == 3 * 149.5 / 15, tt::tolerance(1e-3));
  BOOST_TEST(!m->bound);
  BOOST_TEST(m->evidence.find("started its workers 3 time(s) after the first epoch") !=
                 std::string::npos,
             m->evidence);
  BOOST_TEST(remedy(r, "raise_prefetch") == nullptr);
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
}

BOOST_AUTO_TEST_CASE(persistent_workers_stay_quiet_when_the_workers_persist) {
  const auto r = short_epochs(true).analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_REQUIRE_EQUAL(l.epochs.size(), 4u);
  BOOST_TEST(!l.epochs[1].workers_started);
  BOOST_TEST(remedy(r, "persistent_workers") == nullptr);
}

// A site or dataset name from a trace is bytes, not always UTF-8: the JSON
// report replaces what is invalid instead of failing.
BOOST_AUTO_TEST_CASE(invalid_utf8_in_a_site_still_gives_valid_json) {
  RankBuilder b = one_worker(0.2);
  b.loader_config(0, kTrain, 1, "tr\xff\xfein.py:42");
  stallscope::analyzer::Report rep;
  rep.ranks.push_back(b.analyze());
  std::ostringstream json;
  stallscope::analyzer::write_json(json, rep);
  const auto j = nlohmann::json::parse(json.str());
  BOOST_TEST(j["ranks"][0]["dataloaders"][0]["site"].get<std::string>() ==
             "tr\uFFFD\uFFFDin.py:42");
}

// Hooks that cannot date a step's begin back to its __next__ begin the step
// when __next__ returned: the wait just before a step fed it. An evaluation
// phase left open at the end of the trace counts to its last event.
BOOST_AUTO_TEST_CASE(a_wait_just_before_its_step_fed_it_and_an_open_phase_counts) {
  RankBuilder b;
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < 4; ++i) {
    const double s = 20.0 * i;
    b.sample(w, s, s + 8, SamplePart::kFetch, i);
    b.wait(s, s + 8.1, i).handoff(s, s + 8.1, kTrain, i, 201);
    b.step(i, s + 8.15, s + 20).kernel(s + 8.15, s + 20);
  }
  b.add(Kind::kRange, b.trainer, 80, 80);
  b.t.events.back().phase = stallscope::format::kBegin;
  b.t.events.back().name = b.t.name_id("phase:eval");
  b.kernel(80, 95);
  const auto r = b.analyze();
  BOOST_TEST(r.dataloaders.at(0).waits_in_steps == 4u);
  BOOST_TEST(r.dataloaders.at(0).fed_optimizer);
  BOOST_REQUIRE_EQUAL(r.phases.size(), 1u);
  BOOST_TEST(r.phases[0].total_ms == 15.0, tt::tolerance(kTol));
}

BOOST_AUTO_TEST_CASE(setting_marks_parse_every_form_of_the_contract) {
  stallscope::analyzer::SettingMark m;
  BOOST_TEST(stallscope::analyzer::parse_setting_mark(
      "set refused dataloader[2].persistent_workers=true at a/b.py:7: num_workers=0", m));
  BOOST_TEST(m.status == "refused");
  BOOST_TEST(m.key == "dataloader[2].persistent_workers");
  BOOST_TEST(m.value == "true");
  BOOST_TEST(m.site == "a/b.py:7");
  BOOST_TEST(m.detail == "num_workers=0");
  BOOST_TEST(
      stallscope::analyzer::parse_setting_mark("set refused at train.py:3: TypeError('x')", m));
  BOOST_TEST(m.key == "");
  BOOST_TEST(m.site == "train.py:3");
  BOOST_TEST(m.detail == "TypeError('x')");
  BOOST_TEST(stallscope::analyzer::parse_setting_mark(
      "set refused dataloader.num_workers=-1: out of range", m));
  BOOST_TEST(m.value == "-1");
  BOOST_TEST(m.site == "");
  BOOST_TEST(m.detail == "out of range");
  BOOST_TEST(!stallscope::analyzer::parse_setting_mark("set sail for x=1", m));
  BOOST_TEST(!stallscope::analyzer::parse_setting_mark("sample spans off: items take 3 us", m));
}

// A worker whose batch, put at the end of its fetch, reaches the trainer
// only 1 ms after the worker's next fetch ended (its queue's feeder waited
// for the worker's GIL): one worker (pid 201) fetches batch i in
// [25i, 25i + 25); batch i arrives at 25(i + 2) + 1; the trainer computes
// 10 ms per batch. A wait is the next fetch (preprocessing), not 15 ms of
// hand-off; its last 1 ms falls in the fetch after that, the worker busy
// all along: preprocessing's too. Only the last batch, with no fetch after
// it, has 1 ms of hand-off. The remedy adds workers.
BOOST_AUTO_TEST_CASE(a_batch_held_back_by_its_workers_next_fetch_is_preprocessing) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < kSteps + 1; ++i) {
    const double f = 25.0 * i;
    for (int k = 0; k < 8; ++k) b.sample(w, f + 3 * k, f + 3 * k + 3, SamplePart::kGetItem, i);
    b.sample(w, f + 24, f + 25, SamplePart::kCollate, i, 0, 0, 8);
    b.sample(w, f, f + 25, SamplePart::kFetch, i, 0, 0, 8);
  }
  for (int i = 0; i < kSteps; ++i) {
    const double received = 25.0 * (i + 2) + 1, asked = i == 0 ? 0 : 25.0 * (i + 1) + 11;
    b.step(i, asked, received + 10).wait(asked, received, i).kernel(received, received + 10);
    b.handoff(asked, received, kTrain, i, 201);
  }
  idle_cpus(b, 25.0 * kSteps + 80, 0.9);
  const auto r = b.analyze();
  BOOST_TEST_REQUIRE(r.dataloaders.size() == 1u);
  const DataLoaderReport& l = r.dataloaders[0];
  // Steady waits: 14 ms of the worker's next fetch, then 1 ms of the one after.
  BOOST_TEST(l.split.handoff_ms == 1.0, tt::tolerance(0.05));
  BOOST_TEST(l.split.preprocess_ms + l.split.collate_ms > 10.0 * l.split.handoff_ms);
  const Remedy* m = remedy(r, "more_workers");
  BOOST_TEST_REQUIRE(m != nullptr);
  BOOST_TEST(try_of(r, *m).find("num_workers=2") != std::string::npos, try_of(r, *m));
}

// Two workers that never idle (pids 201, 202), 44 ms a batch each, batch i
// on worker i % 2 in [22(i - i % 2), 22(i - i % 2) + 44): one batch per
// 22 ms between them. Each batch reaches the trainer 20 ms after its put,
// the worker already deep in its next fetch (the queue's feeder waits for
// the worker's GIL, as torch's CPU-bound workers make it). The trainer
// computes 1 ms. The 20 ms are latency, not throughput: the waits are the
// workers' fetches (preprocessing), and no faster hand-off moves the step
// below the 22 ms the workers take per batch. With 4 samples a batch, and
// with 200 (more __getitem__ spans ending after a receive than the walk
// takes fetches: the fetch running at the receive is still found).
BOOST_DATA_TEST_CASE(a_slow_hand_off_beside_busy_workers_is_their_preprocessing,
                     boost::unit_test::data::make({4, 200}), samples) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  const uint32_t w[2] = {b.worker_thread(201), b.worker_thread(202)};
  b.loader_config(0, kTrain, 2);
  b.mark("dataloader batch loader=7 bytes=4096 tensors=2", 1);
  const int n = 2 * kSteps;
  const double item = 44.0 / samples;
  for (int i = 0; i < n + 2; ++i) {
    const double f = 22.0 * (i - i % 2);
    for (int k = 0; k < samples; ++k)
      b.sample(w[i % 2], f + item * k, f + item * (k + 1), SamplePart::kGetItem, uint64_t(i), 0,
               i % 2);
    b.sample(w[i % 2], f, f + 44, SamplePart::kFetch, uint64_t(i), 0, i % 2, uint32_t(samples));
  }
  double t = 0;
  for (int i = 0; i < n; ++i) {
    const double received = 22.0 * (i - i % 2) + 44 + 20;
    b.step(i, t, received + 1).wait(t, received, uint64_t(i)).kernel(received, received + 1);
    b.handoff(t, received, kTrain, uint64_t(i), 201 + uint32_t(i % 2), i % 2);
    t = received + 1;
  }
  idle_cpus(b, t + 40, 0.1);
  const auto r = b.analyze();
  BOOST_TEST(r.cause.find("input-bound: preprocessing") == 0, r.cause);
  // Steady steps of 22 ms: the waits of 21 ms are the fetches'.
  BOOST_TEST(mean_ms(r, Part::kDataHandoff) < 0.05 * 22, mean_ms(r, Part::kDataHandoff));
  BOOST_TEST(mean_ms(r, Part::kDataPreprocess) > 0.8 * 22, mean_ms(r, Part::kDataPreprocess));
  BOOST_TEST(remedy(r, "sharing_strategy") == nullptr);
}

// A worker that waits on storage 90 % of its busy time uses a tenth of a
// CPU: the 1.5 idle CPUs cap the CPU the workers need (8 × 0.1), not their
// number, so 8 workers — above the 2 cores — keep up with the trainer.
BOOST_AUTO_TEST_CASE(workers_waiting_on_storage_get_more_workers_than_cores) {
  const auto r = waiting_worker(4.5, 0.1, 1.5).analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.fetch_storage_share == 0.9, tt::tolerance(1e-6));
  BOOST_TEST(l.fetch_cpu_share == 0.1 * (40.0 * kSteps + 40) / (40.0 * kSteps), tt::tolerance(1e-3));
  const Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=8) at train.py:42");
  BOOST_TEST(r.remedies.front().id == "more_workers");
  BOOST_TEST(m->evidence.find("wait on storage 90 % of their busy time") != std::string::npos, m->evidence);
  // 8 workers × 0.11 CPU of the 1.5 idle + the fetching worker's 0.11.
  BOOST_TEST(m->evidence.find("8 workers need 0.87 CPUs of 1.61 usable") != std::string::npos, m->evidence);
  // 40 ms of fetch over 8 workers: 5 ms per batch, the trainer's own 5 ms.
  BOOST_TEST(m->predicted_step_ms == 5.0, tt::tolerance(0.05));
}

// The same workers on CPU 40 % of the time (storage 60 %): 0.43 CPU each
// (the sampler's CPU over the run, 520 ms, against 480 ms of fetches), so
// the 1.5 idle CPUs allow 1 + 3 workers, fewer than the 8 needed.
BOOST_AUTO_TEST_CASE(workers_waiting_on_storage_are_capped_by_the_cpu_they_need) {
  const auto r = waiting_worker(3.0, 0.4, 1.5).analyze();
  const Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=4) at train.py:42");
  BOOST_TEST(m->evidence.find("4 workers need 1.73 CPUs of 1.93 usable (4 proposed: the usable "
                              "CPUs allow no more)") != std::string::npos,
             m->evidence);
}

// CPU-bound workers (reads 10 % of their time): one more worker per idle
// CPU, as many as the idle CPUs hold, not the 8 Little's law asks for.
BOOST_AUTO_TEST_CASE(cpu_bound_workers_stay_capped_by_idle_cpus) {
  const auto r = waiting_worker(0.5, 0.9, 1.5).analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.fetch_storage_share == 0.1, tt::tolerance(1e-6));
  const Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=3) at train.py:42");
  BOOST_TEST(m->evidence.find("wait on storage") == std::string::npos, m->evidence);
  BOOST_TEST(m->evidence.find("(3 proposed: the idle CPUs allow no more)") != std::string::npos,
             m->evidence);
}

// Two of 96 samples take 30 ms against a 2 ms median, each holding up its
// batch while the trainer waits: the report names their indices and files,
// and slow_samples bounds the gain at the 2 × 28 ms their batches' waits
// exceed the median wait, over the 12 batches waited for.
BOOST_AUTO_TEST_CASE(slow_samples_at_the_head_of_the_line_are_named_with_their_files) {
  const auto r = slow_tail({17, 42}).analyze();
  const DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.samples_timed == 96u);
  BOOST_TEST(l.sample_p50_ms == 2.0, tt::tolerance(1e-6));
  BOOST_TEST(l.sample_p99_ms == 30.0, tt::tolerance(1e-6));
  BOOST_TEST(l.slow_sample_count == 2u);
  BOOST_TEST(l.slow_sample_excess_ms == 56.0, tt::tolerance(1e-6));
  // Nothing queued ahead absorbs them: each of their batches' waits (39 ms)
  // exceeds the median wait (11 ms) by their whole 28 ms beyond the median.
  BOOST_TEST(l.slow_sample_stall_ms == 56.0, tt::tolerance(1e-3));
  BOOST_REQUIRE_EQUAL(l.slow_samples.size(), 2u);
  BOOST_TEST(l.slow_samples[0].index == 17u);
  BOOST_TEST(l.slow_samples[0].file == "/data/0001.z");
  BOOST_TEST(l.slow_samples[1].index == 42u);
  BOOST_TEST(l.slow_samples[1].file == "/data/0002.z");
  const Remedy* m = remedy(r, "slow_samples");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->bound);
  BOOST_TEST(try_of(r, *m).empty());
  BOOST_TEST(m->pytorch_knob.find("samples 17 (/data/0001.z), 42 (/data/0002.z) take up to 30.0 ms "
                                  "against a 2.00 ms median") != std::string::npos,
             m->pytorch_knob);
  const double steps = double(r.steps.size());
  BOOST_TEST(m->gain_ms() == 56.0 / 12 * (double(l.waits_in_steps) / steps), tt::tolerance(1e-3));
  // Text and JSON carry the tail.
  std::ostringstream text;
  stallscope::analyzer::Report rep;
  rep.ranks.push_back(r);
  stallscope::analyzer::write_text(text, rep, {});
  BOOST_TEST(text.str().find("slow samples: 2 of 96 take 5x the median or more (median 2.00 ms, "
                             "p99 30.00 ms): index 17 30.0 ms (/data/0001.z), index 42 30.0 ms "
                             "(/data/0002.z)") != std::string::npos,
             text.str());
  std::ostringstream json;
  stallscope::analyzer::write_json(json, rep);
  const auto j = nlohmann::json::parse(json.str())["ranks"][0]["dataloaders"][0];
  BOOST_TEST(j["slow_sample_count"].get<int>() == 2);
  BOOST_TEST(j["slow_samples"][0]["index"].get<int>() == 17);
  BOOST_TEST(j["slow_samples"][0]["file"].get<std::string>() == "/data/0001.z");
  BOOST_TEST(j["sample_p50_ms"].get<double>() == 2.0, tt::tolerance(1e-6));
}

// No tail: every sample equally slow, or too many slow ones (8 of 96 is
// over 5 %) — then the samples are slow, not a few of them.
BOOST_AUTO_TEST_CASE(no_tail_no_slow_samples) {
  const auto even = slow_tail({}).analyze();
  BOOST_TEST(even.dataloaders.at(0).slow_samples.empty());
  BOOST_TEST(remedy(even, "slow_samples") == nullptr);
  const auto many = slow_tail({3, 13, 23, 33, 43, 53, 63, 73}).analyze();
  BOOST_TEST(many.dataloaders.at(0).slow_samples.empty());
  BOOST_TEST(many.dataloaders.at(0).slow_sample_count == 0u);
  BOOST_TEST(remedy(many, "slow_samples") == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
