// A traced program for the analyzer's end-to-end tests: records, through
// the real recorder (STALLSCOPE_OUT=<dir>), one of three known workloads of
// 10 ms steps, then exits normally so the file is complete.
//
//   analyzer_probe data|compute|host-after-sync [steps=30]
//
// Timestamps are planned (a fixed schedule from a start tick, converted with
// a measured tick rate) rather than taken around real sleeps, so a loaded
// test machine cannot blur the verdict; each step is recorded only once its
// planned end has passed, so no event lies in the recorder's future.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stallscope/clock.hpp"
#include "stallscope/trace.hpp"

namespace {

namespace ss = stallscope;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStep = 10 * kMs;

struct Plan {
  ss::Ticks t0 = 0;
  int64_t mono0 = 0;
  double ticks_per_ns = 1;
  ss::Ticks at(int64_t ns) const { return t0 + ss::Ticks(double(ns) * ticks_per_ns); }
  // Sleeps until the planned time `ns` (from the start) has passed.
  void wait_until(int64_t ns) const {
    while (ss::mono_ns() - mono0 < ns) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
};

Plan calibrate() {
  Plan p;
  const ss::Ticks a = ss::ticks_now();
  const int64_t ma = ss::mono_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const ss::Ticks b = ss::ticks_now();
  const int64_t mb = ss::mono_ns();
  p.ticks_per_ns = double(b - a) / double(mb - ma);
  p.t0 = b;
  p.mono0 = mb;
  return p;
}

void kernel(const Plan& p, int64_t a, int64_t b) {
  static const ss::NameId gemm = ss::intern("gemm");
  ss::record_kernel(p.at(a), p.at(b), ss::DeviceWork{gemm, 0, 7, 0, false});
}

// 6 ms data wait (a 5 ms read then a 1 ms decode of the step's one sample,
// on a worker thread), then 4 ms of compute: storage-bound.
void data_step(const Plan& p, uint64_t i, int64_t s) {
  static const ss::NameId file = ss::intern("/data/shard-0"), decode = ss::intern("decode");
  std::thread worker([&] {
    ss::StorageRead r;
    r.file = file;
    r.bytes = 1 << 20;
    r.sample_id = i + 1;
    r.tier = ss::format::Tier::kLocal;
    ss::record_storage_read(p.at(s), p.at(s + 5 * kMs), r);
    ss::record_preprocess(decode, p.at(s + 5 * kMs), p.at(s + 6 * kMs), ss::Work{i + 1, i + 1, 1, 0});
  });
  worker.join();
  const uint64_t sample = i + 1;
  ss::record_batch_ready(p.at(s + 6 * kMs), i + 1, {&sample, 1});
  ss::record_data_wait(p.at(s), p.at(s + 6 * kMs), i + 1);
  kernel(p, s + 6 * kMs, s + kStep);
}

// 9.8 ms of kernels per 10 ms step: compute-bound.
void compute_step(const Plan& p, uint64_t, int64_t s) { kernel(p, s + kMs / 10, s + kStep - kMs / 10); }

// 3 ms kernel, a blocking sync returning with it, 6 ms of host work, then
// 1 ms kernel: "host after sync" dominates.
void sync_step(const Plan& p, uint64_t, int64_t s) {
  kernel(p, s, s + 3 * kMs);
  ss::record_sync(p.at(s + kMs / 2), p.at(s + 3 * kMs), ss::DeviceWork{0, 0, 7, 0, false}, 0);
  kernel(p, s + 9 * kMs, s + kStep);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const long steps = argc > 2 ? std::atol(argv[2]) : 30;
  void (*step)(const Plan&, uint64_t, int64_t) = mode == "data"              ? data_step
                                                 : mode == "compute"         ? compute_step
                                                 : mode == "host-after-sync" ? sync_step
                                                                             : nullptr;
  if (step == nullptr) {
    std::fprintf(stderr, "analyzer_probe: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  const Plan p = calibrate();
  for (long i = 0; i < steps; ++i) {
    const int64_t s = int64_t(i) * kStep + kMs;
    p.wait_until(s + kStep);
    step(p, uint64_t(i), s);
    ss::record_step(uint64_t(i), p.at(s), p.at(s + kStep));
  }
  std::printf("steps %ld\n", steps);
  return 0;
}
