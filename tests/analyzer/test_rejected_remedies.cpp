// Remedies considered and not proposed, with the reason (issue #25); the
// guard rails checked before more DataLoader workers (shared memory,
// descriptors, threads per worker, from the hooks' marks); fewer workers
// when loader CPU slows the trainer. Hand-built ranks, times in ms.
#include <sstream>
#include <string>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "analyzer/rank_builder.hpp"
#include "analyzer/report_lookup.hpp"
#include "remedy.hpp"  // cpu_whose, attribute_node_cpu
#include "stallscope/analyzer/render.hpp"

using namespace stallscope::testing;
namespace an = stallscope::analyzer;
using stallscope::format::SamplePart;
namespace tt = boost::test_tools;

namespace {

constexpr double kTol = 1e-6;
constexpr uint64_t kTrain = 7;
constexpr int kSteps = 12;
constexpr double kMiB = 1024.0 * 1024;

an::RankReport analyze_all(const RankBuilder& b) {
  an::AnalyzeOptions o;
  o.max_remedies = 64;
  return b.analyze(o);
}

const an::RejectedRemedy* rejected(const an::RankReport& r, const std::string& id) {
  for (const auto& x : r.rejected_remedies)
    if (x.id == id) return &x;
  return nullptr;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void idle_cpus(RankBuilder& b, double until, double idle, double cpus = 2) {
  b.t.procs[0].affinity_cpus = cpus;
  for (double t = 0; t <= until; t += 5) b.counter("cpu.idle", t, idle);
}

// `workers` DataLoader workers (pids 201…) make a batch each in `fetch_ms`
// (eight __getitem__ inside), one after another on worker i % workers; the
// trainer computes 10 ms per batch and waits for the rest. With one worker
// and 20 ms: step i = [20i + 10.1, 20i + 30.1), 2 workers keep up.
RankBuilder loader_run(double fetch_ms, double idle, double cpus = 2, uint32_t workers = 1) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  std::vector<uint32_t> w;
  for (uint32_t k = 0; k < workers; ++k) w.push_back(b.worker_thread(201 + k));
  b.loader_config(0, kTrain, workers);
  const double per = fetch_ms / workers;  // one batch ready every `per` ms
  double start = 0;
  for (int i = 0; i < kSteps; ++i) {
    const uint32_t k = uint32_t(i) % workers;
    const double put = per * i + fetch_ms;
    const double f = put - fetch_ms;
    for (int s = 0; s < 8; ++s)
      b.sample(w[k], f + fetch_ms / 8 * s, f + fetch_ms / 8 * (s + 1), SamplePart::kGetItem, i, 0,
               int32_t(k));
    b.sample(w[k], f, put, SamplePart::kFetch, i, 0, int32_t(k), 8);
    const double got = std::max(start, put) + 0.1;
    b.step(i, start, got + 10).wait(start, got, i).kernel(got, got + 10);
    b.handoff(start, got, kTrain, i, 201 + k, int32_t(k));
    start = got + 10;
  }
  idle_cpus(b, start + 40, idle, cpus);
  return b;
}

std::string text_of(const an::RankReport& r) {
  an::Report rep;
  rep.ranks.push_back(r);
  std::ostringstream o;
  an::write_text(o, rep, {});
  return o.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rejected_remedies)

// ---- more_workers: the CPUs are busy, and whose they are

BOOST_AUTO_TEST_CASE(more_workers_rejected_when_no_cpu_is_idle_names_whose_cpu) {
  RankBuilder b = loader_run(20, 0.2);
  const auto r = analyze_all(b);
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(x->title == "more workers");
  BOOST_TEST(has(x->reason, "1.80 of 2.0 CPUs busy during stalls (2 worker(s) would keep up)"), x->reason);
  // No CPU time was recorded for the rank's own processes: the busy CPUs
  // were other processes' (other programs: one rank on the node).
  BOOST_TEST(has(x->reason, "this rank's processes used 0.0 of its 2.0-core budget"), x->reason);
  BOOST_TEST(has(x->reason, "1.8 CPUs busy with other processes or ranks: other programs"), x->reason);
  // Two ranks on the node: other ranks are named too.
  b.t.probes.ranks_on_node = 2;
  const auto two = analyze_all(b);
  const an::RejectedRemedy* y = rejected(two, "more_workers");
  BOOST_REQUIRE(y != nullptr);
  BOOST_TEST(has(y->reason, "the node's 1 other rank(s) and other programs"), y->reason);
  // Shown in the text report after the remedies, and in the JSON report.
  const std::string text = text_of(r);
  const size_t at = text.find("considered, not proposed:\n");
  BOOST_TEST(at != std::string::npos, text);
  BOOST_TEST(at > text.find("remedies (mean steady step"), text);
  BOOST_TEST(text.find("\n  - more workers: 1.80 of 2.0 CPUs busy during stalls", at) != std::string::npos,
             text);
  an::Report rep;
  rep.ranks.push_back(r);
  std::ostringstream js;
  an::write_json(js, rep);
  const auto j = nlohmann::json::parse(js.str());
  bool found = false;
  for (const auto& e : j["ranks"][0]["rejected_remedies"])
    found = found || (e["id"] == "more_workers" && e["reason"] == x->reason);
  BOOST_TEST(found, js.str().substr(0, 200));
  std::ostringstream html;
  an::write_html(html, rep);
  BOOST_TEST(has(html.str(), "Considered, not proposed:</p><ul class='rejected'>\n<li><b>deeper prefetch</b>"),
             html.str());
  BOOST_TEST(has(html.str(), "<li><b>more workers</b>: 1.80 of 2.0 CPUs busy during stalls"));
}

// The same run with a CPU idle proposes the workers: no rejection then.
BOOST_AUTO_TEST_CASE(more_workers_proposed_is_not_also_rejected) {
  const auto r = analyze_all(loader_run(20, 0.9));
  const an::Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=2) at train.py:42");
  BOOST_TEST(rejected(r, "more_workers") == nullptr);
  // cache_decoded: the CPUs leave room for the workers, so not caching.
  const an::RejectedRemedy* c = rejected(r, "cache_decoded");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(has(c->reason, "the CPUs leave room for the 2 worker(s) the DataLoader needs"), c->reason);
  // raise_prefetch: the one worker does not keep up on average.
  const an::RejectedRemedy* p = rejected(r, "raise_prefetch");
  BOOST_REQUIRE(p != nullptr);
  BOOST_TEST(has(p->reason, "stage does not keep up on average"), p->reason);
}

// Two workers keep up on average (the deeper prefetch is proposed): more
// workers are rejected with the numbers that say so.
BOOST_AUTO_TEST_CASE(more_workers_rejected_when_the_workers_keep_up_on_average) {
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
  const auto r = analyze_all(b);
  BOOST_TEST(remedy(r, "raise_prefetch") != nullptr);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "the 2 worker(s) keep up on average: a batch's fetch takes 15.00 ms and "
                            "the trainer 14.90 ms per batch"), x->reason);
  BOOST_TEST(has(x->reason, "so 2 are enough"), x->reason);
}

// Waits that are hand-offs, not fetches: more workers fetch no faster.
BOOST_AUTO_TEST_CASE(more_workers_rejected_when_the_waits_are_hand_offs) {
  RankBuilder b;
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i;
    b.sample(w, s, s + 2, SamplePart::kFetch, i);
    b.step(i, s, s + 20).wait(s, s + 10, i).kernel(s + 10, s + 20).handoff(s, s + 10, kTrain, i, 201);
  }
  idle_cpus(b, 20.0 * kSteps + 20, 0.2);
  const auto r = analyze_all(b);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "80 % of the waits on the DataLoader are outside its fetches"), x->reason);
  // The hand-off is its own part now: what caching could shorten is the
  // 2 ms fetch, no more; the first remedy is the hand-off's.
  BOOST_REQUIRE(!r.remedies.empty());
  BOOST_TEST(r.remedies.front().id == "sharing_strategy");
  if (const an::Remedy* c = remedy(r, "cache_decoded"))
    BOOST_TEST(c->step_ms - c->predicted_step_ms <= 2.0 + 1e-6);
}

// A DataLoader waited for mostly in a worker that had not yet begun (its
// preprocessing part), its fetches' transforms a small share: caching
// samples is considered and not proposed, with the share.
BOOST_AUTO_TEST_CASE(cache_decoded_rejected_when_the_transforms_are_a_small_share) {
  RankBuilder b;
  const uint32_t w = b.worker_thread(201);
  b.loader_config(0, kTrain, 1);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i;
    // The worker starts the batch's fetch 8 ms into the wait: the 8 ms
    // before are a wait for the worker, the 2 ms fetch preprocessing.
    b.sample(w, s + 8, s + 10, SamplePart::kFetch, i);
    b.step(i, s, s + 20).wait(s, s + 10.05, i).kernel(s + 10.05, s + 20).handoff(s, s + 10.05, kTrain, i, 201);
  }
  idle_cpus(b, 20.0 * kSteps + 20, 0.2);
  const auto r = analyze_all(b);
  const an::RejectedRemedy* c = rejected(r, "cache_decoded");
  BOOST_REQUIRE(c != nullptr);
  BOOST_TEST(has(c->reason, "transforms (preprocessing and collate) are 20 % of its waits outside "
                            "the hand-off"),
             c->reason);
}

// ---- guard rails before more workers

// /dev/shm holds 300 MiB free; a batch is 64 MiB (and a page per tensor)
// with prefetch_factor 2: two workers need (2 x 2 + 2 the trainer holds) x
// 64 MiB = 384 MiB, one fits (256 MiB) — no more than today, so rejected
// with the fix.
BOOST_AUTO_TEST_CASE(shared_memory_too_small_for_the_batches_in_flight_rejects_more_workers) {
  RankBuilder b = loader_run(20, 0.9);
  b.mark("dataloader env loader=7 shm_free=" + std::to_string(int64_t(300 * kMiB)) +
             " shm_total=" + std::to_string(int64_t(512 * kMiB)) + " nofile=1024 fds=12 sharing=file_descriptor",
         0.5);
  b.mark("dataloader batch loader=7 bytes=" + std::to_string(int64_t(64 * kMiB)) + " tensors=2", 30);
  const auto r = analyze_all(b);
  const an::DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.shm_free_bytes == 300 * kMiB);
  BOOST_TEST(l.shm_total_bytes == 512 * kMiB);
  BOOST_TEST(l.batch_bytes == 64 * kMiB);
  BOOST_TEST(l.batch_tensors == 2);
  BOOST_TEST(l.nofile_soft == 1024);
  BOOST_TEST(l.open_fds == 12);
  BOOST_TEST(l.sharing_strategy == "file_descriptor");
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "2 worker(s) would keep up, but /dev/shm has 300.0 MiB free and 2 workers "
                            "need 384.0 MiB: (2 x prefetch_factor 2 + 2 held by the trainer) batches "
                            "of 64.0 MiB"), x->reason);
  BOOST_TEST(has(x->reason, "Bus error"), x->reason);
  BOOST_TEST(has(x->reason, "fix: raise /dev/shm to 1 GiB or more: docker run --shm-size=1g"), x->reason);
  BOOST_TEST(has(text_of(r), "guard rails: /dev/shm 300.0 MiB free of 512.0 MiB, batch 64.0 MiB in 2 "
                             "tensor(s); RLIMIT_NOFILE 1024 (12 open), sharing file_descriptor"));
}

// Measured with torch 1.13 (train.py of tests/torch_scenarios, batches of
// 8 x 3x32x32 floats and 8 labels: 98368 bytes in 2 tensors) in a mount
// namespace whose /dev/shm was a 450 KiB tmpfs: one worker trained, two
// were "killed by signal: Bus error". The model agrees: 1 worker needs
// (2 + 2) x 104 KiB = 416 KiB, 2 need 624 KiB.
BOOST_AUTO_TEST_CASE(shared_memory_model_matches_the_bus_error_measured) {
  RankBuilder b = loader_run(20, 0.9);
  b.mark("dataloader env loader=7 shm_free=460800 shm_total=460800", 0.5);
  b.mark("dataloader batch loader=7 bytes=98368 tensors=2", 30);
  const auto r = analyze_all(b);
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "/dev/shm has 450 KiB free and 2 workers need 624 KiB"), x->reason);
  // With 650 KiB free the two fit: proposed.
  RankBuilder more = loader_run(20, 0.9);
  more.mark("dataloader env loader=7 shm_free=665600", 0.5);
  more.mark("dataloader batch loader=7 bytes=98368 tensors=2", 30);
  BOOST_TEST(remedy(analyze_all(more), "more_workers") != nullptr);
}

// Four workers would keep up (40 ms fetch, 10 ms of trainer per batch) and
// four CPUs are idle, but /dev/shm holds the batches of two: two proposed,
// saying why, with the prediction at two.
BOOST_AUTO_TEST_CASE(shared_memory_lowers_the_workers_to_what_fits) {
  RankBuilder b = loader_run(40, 3.5, 4);
  const auto plain = analyze_all(b);
  const an::Remedy* all = remedy(plain, "more_workers");
  BOOST_REQUIRE(all != nullptr);
  BOOST_TEST(input(*all, "suggested_workers") == 4);
  // (2 x 2 + 2) x 64 MiB = 384 MiB fit, (3 x 2 + 2) x 64 MiB = 512 MiB do not.
  b.mark("dataloader env loader=7 shm_free=" + std::to_string(int64_t(450 * kMiB)), 0.5);
  b.mark("dataloader batch loader=7 bytes=" + std::to_string(int64_t(64 * kMiB)) + " tensors=1", 50);
  const auto r = analyze_all(b);
  const an::Remedy* m = remedy(r, "more_workers");
  BOOST_REQUIRE(m != nullptr);
  BOOST_TEST(m->pytorch_knob == "DataLoader(num_workers=2) at train.py:42");
  BOOST_TEST(input(*m, "suggested_workers") == 2);
  BOOST_TEST(input(*m, "shm_free_bytes") == 450 * kMiB);
  BOOST_TEST(has(m->evidence, "(2 proposed, not 4: /dev/shm has 450.0 MiB free"), m->evidence);
  // At 2 workers: each batch (one wait per step) waits 40 / 2 - 10 = 10 ms
  // of fetch beyond the trainer's time; at 4, none.
  BOOST_TEST(m->predicted_step_ms - all->predicted_step_ms == 10.0, tt::tolerance(kTol));
  BOOST_TEST(rejected(r, "more_workers") == nullptr);
}

// With the file_descriptor strategy a worker that runs ahead of the
// trainer holds (2 x 2 + 1) x 40 tensors + the 20 descriptors it inherits
// = 220 (measured with torch 1.13: 4 workers of batches of 40 tensors
// needed RLIMIT_NOFILE 228, 1 worker that the trainer waited for 134):
// under a limit of 160 more workers are rejected; under 256 they fit.
BOOST_AUTO_TEST_CASE(descriptor_limit_rejects_more_workers_with_the_ulimit_fix) {
  RankBuilder b = loader_run(20, 0.9);
  b.mark("dataloader env loader=7 nofile=160 fds=20 sharing=file_descriptor", 0.5);
  b.mark("dataloader batch loader=7 bytes=4096 tensors=40", 30);
  const auto r = analyze_all(b);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "RLIMIT_NOFILE is 160, and a worker that runs ahead of the trainer holds "
                            "up to (2 x prefetch_factor 2 + 1) x 40 tensors + the 20 descriptors it "
                            "inherits = 220"), x->reason);
  BOOST_TEST(has(x->reason, "fix: ulimit -n 65536"), x->reason);
  BOOST_TEST(has(x->reason, "set_sharing_strategy('file_system')"), x->reason);
  // The file_system strategy holds no descriptor per tensor: proposed.
  RankBuilder fs = loader_run(20, 0.9);
  fs.mark("dataloader env loader=7 nofile=160 fds=20 sharing=file_system", 0.5);
  fs.mark("dataloader batch loader=7 bytes=4096 tensors=40", 30);
  BOOST_TEST(remedy(analyze_all(fs), "more_workers") != nullptr);
  // A limit of 256 leaves room: proposed.
  RankBuilder room = loader_run(20, 0.9);
  room.mark("dataloader env loader=7 nofile=256 fds=20 sharing=file_descriptor", 0.5);
  room.mark("dataloader batch loader=7 bytes=4096 tensors=40", 30);
  BOOST_TEST(remedy(analyze_all(room), "more_workers") != nullptr);
}

// Each worker runs 6 threads, torch 4 of them: a pool of 4 per worker on a
// 2-core budget leaves room for no worker at all.
BOOST_AUTO_TEST_CASE(thread_pools_in_the_workers_reject_more_workers) {
  RankBuilder b = loader_run(20, 0.9);
  const uint32_t worker_track = uint32_t(b.t.tracks.size() - 1);  // pid 201's thread
  BOOST_REQUIRE(b.t.tracks[worker_track].tid == 201u);
  b.mark_on(worker_track, "dataloader worker threads=6 torch_threads=4", 20);
  const auto r = analyze_all(b);
  const an::DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.worker_threads == 6);
  BOOST_TEST(l.worker_torch_threads == 4);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "each worker runs a pool of 4 threads (6 threads in all, "
                            "torch.get_num_threads() 4 there), so 2 workers run 8 compute threads "
                            "on the rank's 2.0-core budget"), x->reason);
  BOOST_TEST(has(x->reason, "fix: one thread per worker: torch.set_num_threads(1)"), x->reason);
  BOOST_TEST(has(x->reason, "in worker_init_fn"), x->reason);
  // A worker that started its queue's feeder and resource sharer beyond
  // the 2 threads it began with has no pool: proposed.
  RankBuilder plain = loader_run(20, 0.9);
  plain.mark_on(worker_track, "dataloader worker threads=4 base=2 torch_threads=1", 20);
  const auto q = analyze_all(plain);
  BOOST_TEST(q.dataloaders.at(0).worker_threads == 4);
  BOOST_TEST(q.dataloaders.at(0).worker_new_threads == 2);
  BOOST_TEST(remedy(q, "more_workers") != nullptr);
  // Three more threads than that (a BLAS pool): a pool of 3, no room.
  RankBuilder blas = loader_run(20, 0.9);
  blas.mark_on(worker_track, "dataloader worker threads=7 base=2 torch_threads=1", 20);
  const auto p = analyze_all(blas);
  BOOST_TEST(remedy(p, "more_workers") == nullptr);
  const an::RejectedRemedy* y = rejected(p, "more_workers");
  BOOST_REQUIRE(y != nullptr);
  BOOST_TEST(has(y->reason, "each worker runs a pool of 3 threads (7 threads in all"), y->reason);
  // Not torch's pool (torch 1 there): the fix names the other libraries.
  BOOST_TEST(!has(y->reason, "torch.set_num_threads(1)"), y->reason);
  BOOST_TEST(has(y->reason, "fix: one thread per worker for the pool's library: "
                            "cv2.setNumThreads(0)"), y->reason);
}

// What a torch 1.13 worker whose worker_init_fn called
// torch.set_num_threads(4) showed (tests/attach/test_torch_threads.cpp): 9
// threads from 1 = its queue's 2, OpenMP's 3 and the 3 idle ones of torch's
// pthreadpool. The pool is torch's 4, not the 6 started beyond the queue's.
BOOST_AUTO_TEST_CASE(torchs_idle_pthreadpool_is_no_part_of_a_workers_pool) {
  RankBuilder b = loader_run(20, 0.9);
  const uint32_t worker_track = uint32_t(b.t.tracks.size() - 1);
  b.mark_on(worker_track, "dataloader worker threads=6 base=1 torch_threads=4", 20);
  b.mark_on(worker_track, "dataloader worker threads=9 base=1 torch_threads=4", 40);
  const auto r = analyze_all(b);
  BOOST_TEST(r.dataloaders.at(0).worker_threads == 9);  // the most of the worker's marks
  BOOST_TEST(r.dataloaders.at(0).worker_new_threads == 8);
  const an::RejectedRemedy* x = rejected(r, "more_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "each worker runs a pool of 4 threads (9 threads in all, "
                            "torch.get_num_threads() 4 there)"), x->reason);
  BOOST_TEST(has(x->reason, "fix: one thread per worker: torch.set_num_threads(1)"), x->reason);
}

// Malformed guard marks leave the facts unknown (and limit nothing).
BOOST_AUTO_TEST_CASE(malformed_guard_marks_leave_the_facts_unknown) {
  RankBuilder b = loader_run(20, 0.9);
  b.mark("dataloader env loader=7 shm_free=-5 nofile=12x fds=", 0.5);
  b.mark("dataloader batch loader=x bytes=99", 30);
  const auto r = analyze_all(b);
  const an::DataLoaderReport& l = r.dataloaders.at(0);
  BOOST_TEST(l.shm_free_bytes == -1);
  BOOST_TEST(l.nofile_soft == -1);
  BOOST_TEST(l.open_fds == -1);
  BOOST_TEST(l.batch_bytes == -1);
  BOOST_TEST(remedy(r, "more_workers") != nullptr);
}

// ---- the other rules' rejections

BOOST_AUTO_TEST_CASE(pinned_memory_rejected_when_the_copies_are_already_pinned) {
  RankBuilder b;
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i;
    b.step(i, s, s + 20).copy(Kind::kH2D, s, s + 5, 1 << 20, true).kernel(s + 5, s + 20);
  }
  const auto r = analyze_all(b);
  BOOST_TEST(remedy(r, "pinned_memory") == nullptr);
  const an::RejectedRemedy* x = rejected(r, "pinned_memory");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "100 % of H2D bytes are already pinned (exposed H2D 5.00 ms per step)"),
             x->reason);
  // No DataLoader in this run: no DataLoader rule lists anything.
  for (const char* id : {"more_workers", "raise_prefetch", "persistent_workers", "cache_decoded",
                         "fewer_workers"})
    BOOST_TEST(rejected(r, id) == nullptr, id);
}

// Two epochs of 40 batches, workers started again for the second: their
// start-ups (30.5 ms each) are 3 % of the run, under 10 %.
BOOST_AUTO_TEST_CASE(persistent_workers_rejected_when_start_ups_are_under_10_percent) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  for (int e = 0; e < 2; ++e) {
    const uint32_t w = b.worker_thread(201 + e);
    const double base = 1000.0 * e;
    b.loader_config(base, kTrain, 1, "train.py:42", uint32_t(e));
    for (int i = 0; i < 40; ++i) {
      const double s = base + 30 + 20.0 * i;
      b.sample(w, s - 10, s, SamplePart::kFetch, i);
      const double asked = i == 0 ? base + 1 : s - 10;
      b.step(40 * e + i, asked, s + 10).wait(asked, s + 0.5, i).kernel(s + 0.5, s + 10);
      b.handoff(asked, s + 0.5, kTrain, i, 201 + e, 0, uint32_t(e));
    }
  }
  idle_cpus(b, 2000, 1.0);
  const auto r = analyze_all(b);
  BOOST_TEST(remedy(r, "persistent_workers") == nullptr);
  const an::RejectedRemedy* x = rejected(r, "persistent_workers");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "the workers started 1 time(s) after the first epoch, but their start-ups "
                            "(30.5 ms, 30.5 ms) are 3.4 % of the run's 1819 ms, under 10 %"), x->reason);
}

BOOST_AUTO_TEST_CASE(raise_prefetch_rejected_on_the_trainer_thread) {
  RankBuilder b;
  b.loader_config(0, kTrain, 0);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i;
    b.sample(b.trainer, s, s + 8, SamplePart::kFetch, i, 0, -1);
    b.step(i, s, s + 20).wait(s, s + 8, i).kernel(s + 8, s + 20);
  }
  idle_cpus(b, 300, 1.0);
  const auto r = analyze_all(b);
  const an::RejectedRemedy* x = rejected(r, "raise_prefetch");
  BOOST_REQUIRE(x != nullptr);
  BOOST_TEST(has(x->reason, "num_workers=0"), x->reason);
}

// A compute-bound run with no DataLoader lists no rejection at all.
BOOST_AUTO_TEST_CASE(a_compute_bound_run_lists_nothing_considered) {
  RankBuilder b;
  for (int i = 0; i < kSteps; ++i) b.step(i, 20.0 * i, 20.0 * i + 20).kernel(20.0 * i, 20.0 * i + 19.9);
  const auto r = analyze_all(b);
  BOOST_TEST(r.rejected_remedies.empty());
  BOOST_TEST(!has(text_of(r), "considered, not proposed"));
}

// ---- fewer_workers: loader CPU slows the trainer

namespace {
// Four workers (pids 201-204) on two CPUs fill them (no CPU idle in steps);
// each fetches a batch in 8 ms, long before it is asked for. The trainer
// waits 0.2 ms per batch, computes 10 ms and is then off CPU 9.8 ms more
// per 20 ms step, outside its data waits: it waits for a CPU.
RankBuilder crowded(uint32_t workers, double idle) {
  RankBuilder b;
  b.t.procs[0].cmdline = {"python3", "train.py"};
  std::vector<uint32_t> w;
  for (uint32_t k = 0; k < workers; ++k) w.push_back(b.worker_thread(201 + k));
  b.loader_config(0, kTrain, workers);
  for (int i = 0; i < kSteps; ++i) {
    const double s = 20.0 * i + 20;
    const uint32_t k = uint32_t(i) % workers;
    b.sample(w[k], s - 12, s - 4, SamplePart::kFetch, i, 0, int32_t(k));
    b.step(i, s, s + 20).wait(s, s + 0.2, i).kernel(s + 0.2, s + 10.2);
    b.handoff(s, s + 0.2, kTrain, i, 201 + k, int32_t(k));
  }
  idle_cpus(b, 20.0 * kSteps + 40, idle);
  for (double t = 0; t <= 20.0 * kSteps + 40; t += 5) b.counter("cpu.thread_ns", t, 0, 100);
  return b;
}
}  // namespace

BOOST_AUTO_TEST_CASE(fewer_workers_when_the_trainer_waits_for_a_cpu_its_workers_hold) {
  const auto r = analyze_all(crowded(4, 0.0));
  BOOST_TEST(r.parts[an::idx(Part::kHostBlocked)].share > 0.4);
  const an::Remedy* m = remedy(r, "fewer_workers");
  BOOST_REQUIRE(m != nullptr);
  // ceil(1.25 x 8 / 19.8) = 1 worker, beside the trainer's CPU: its wait goes.
  BOOST_TEST(input(*m, "suggested_workers") == 1);
  BOOST_TEST(input(*m, "fetch_ms_per_batch") == 8.0, tt::tolerance(kTol));
  BOOST_TEST(input(*m, "trainer_ms_per_batch") == 19.8, tt::tolerance(1e-3));
  BOOST_TEST(m->pytorch_knob.find("DataLoader(num_workers=1) at train.py:42; or keep the workers off "
                                  "the trainer's core") == 0u, m->pytorch_knob);
  BOOST_TEST(try_of(r, *m) ==
             "stallscope run --set 'dataloader[train.py:42].num_workers=1' -- python3 train.py");
  BOOST_TEST(m->bound);
  const double blocked = input(*m, "host_blocked_ms");
  BOOST_TEST(blocked == 9.8, tt::tolerance(0.02));
  BOOST_TEST(m->step_ms - m->predicted_step_ms == blocked, tt::tolerance(kTol));
  BOOST_TEST(has(m->evidence, "the trainer is off CPU 9.80 ms per step outside its data waits"), m->evidence);
  BOOST_TEST(remedy(r, "more_workers") == nullptr);
}

// Near misses: a CPU idle in the steps (the trainer's wait is not for a
// CPU), or no more workers than CPUs.
BOOST_AUTO_TEST_CASE(fewer_workers_stays_quiet_with_a_cpu_idle_or_few_workers) {
  BOOST_TEST(remedy(analyze_all(crowded(4, 1.0)), "fewer_workers") == nullptr);
  BOOST_TEST(remedy(analyze_all(crowded(1, 0.0)), "fewer_workers") == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- whose CPU: the node's other ranks apart from other programs

// Two ranks of one node on 2 CPUs, 0.2 idle during stalls: rank 0 used 1.0,
// rank 1 0.6, so of the 0.8 busy outside rank 0, 0.6 was rank 1 and 0.2
// other programs. A rank analysed alone keeps "ranks and other programs".
BOOST_AUTO_TEST_CASE(whose_cpu_splits_the_other_ranks_from_other_programs) {
  an::Report rep;
  for (const double used : {1.0, 0.6}) {
    an::RankReport r;
    r.rank = int64_t(rep.ranks.size());
    r.host = "node-a";
    r.cpu.known = true;
    r.cpu.affinity_cpus = 2;
    r.cpu.ranks_on_node = 2;
    r.cpu.budget_cores = 1;
    r.cpu.used_cores = used;
    r.cpu.idle_during_stalls = 0.2;
    r.rejected_remedies.push_back({an::RemedyId::kMoreWorkers, "more_workers", "more workers",
                                   "no usable CPU: " + an::cpu_whose(r.cpu) + ": more workers …"});
    rep.ranks.push_back(std::move(r));
  }
  const std::string alone = rep.ranks[0].rejected_remedies[0].reason;
  BOOST_TEST(has(alone, "the node's 1 other rank(s) and other programs"), alone);
  an::attribute_node_cpu(rep);
  BOOST_TEST(rep.ranks[0].cpu.other_ranks_cores == 0.6, tt::tolerance(kTol));
  BOOST_TEST(rep.ranks[1].cpu.other_ranks_cores == 1.0, tt::tolerance(kTol));
  const std::string split = rep.ranks[0].rejected_remedies[0].reason;
  BOOST_TEST(has(split, "(0.8 CPUs busy with other processes: 0.6 the node's 1 other rank(s), 0.2 "
                        "other programs)"),
             split);
  BOOST_TEST(has(split, ": more workers …"), split);
  // Rank 1: 1.2 busy outside it, 1.0 of it rank 0.
  BOOST_TEST(has(rep.ranks[1].rejected_remedies[0].reason,
                 "1.0 the node's 1 other rank(s), 0.2 other programs"),
             rep.ranks[1].rejected_remedies[0].reason);

  // One rank of two analysed alone: unknown, the words stay.
  an::Report one;
  one.ranks.push_back(rep.ranks[0]);
  one.ranks[0].cpu.other_ranks_cores = -1;
  one.ranks[0].rejected_remedies[0].reason = alone;
  an::attribute_node_cpu(one);
  BOOST_TEST(one.ranks[0].cpu.other_ranks_cores == -1);
  BOOST_TEST(one.ranks[0].rejected_remedies[0].reason == alone);
}
