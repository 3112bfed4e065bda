// A traced program for the analyzer's end-to-end tests: records, through
// the real recorder (STALLSCOPE_OUT=<dir>), one of five known workloads of
// 10 ms steps, then exits normally so the file is complete.
//
//   analyzer_probe data|compute|host-after-sync|small-files|bursty [steps=30]
//
// Timestamps are planned (a fixed schedule from a start tick, converted with
// a measured tick rate) rather than taken around real sleeps, so a loaded
// test machine cannot blur the verdict; each step is recorded only once its
// planned end has passed, so no event lies in the recorder's future.
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
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

// One long-lived loader thread that runs each step's producer work while
// the trainer waits for it: its records come from one thread, as from one
// DataLoader worker (a thread per step would count as a worker per step).
class LoaderThread {
 public:
  LoaderThread() : thread_([this] { loop(); }) {}
  ~LoaderThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Runs `job` on the loader thread; returns once it is done.
  void run(std::function<void()> job) {
    std::unique_lock lock(mu_);
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [this] { return !job_; });
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || job_; });
      if (!job_) return;
      job_();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};
LoaderThread* loader = nullptr;

ss::StorageRead local_read(const std::string& path, uint64_t bytes, uint64_t sample) {
  ss::StorageRead r;
  r.file = ss::intern(path);
  r.bytes = bytes;
  r.sample_id = sample;
  r.tier = ss::format::Tier::kLocal;
  return r;
}

// 16 samples of 64 KiB, each in a file of its own, read (0.25 ms) and
// decoded (0.05 ms) one after the other on the loader thread while the
// trainer waits 4.8 ms; then 5.2 ms of compute: storage-bound on many
// small files.
void small_files_step(const Plan& p, uint64_t i, int64_t s) {
  static const ss::NameId decode = ss::intern("decode");
  constexpr int64_t kRead = kMs / 4, kDecode = kMs / 20, kWait = 16 * (kRead + kDecode);
  std::vector<uint64_t> samples;
  loader->run([&] {
    for (uint64_t j = 0; j < 16; ++j) {
      const uint64_t sample = 16 * i + j + 1;
      const int64_t at = s + int64_t(j) * (kRead + kDecode);
      const std::string path = "/data/img-" + std::to_string(sample) + ".jpg";
      ss::record_storage_read(p.at(at), p.at(at + kRead), local_read(path, 64 << 10, sample));
      ss::record_preprocess(decode, p.at(at + kRead), p.at(at + kRead + kDecode),
                            ss::Work{sample, i + 1, 1, 0});
      samples.push_back(sample);
    }
  });
  ss::record_batch_ready(p.at(s + kWait), i + 1, samples);
  ss::record_data_wait(p.at(s), p.at(s + kWait), i + 1);
  kernel(p, s + kWait, s + kStep);
}

// The loader reads the step's one sample (256 KiB, 1.1 ms) and decodes it
// (0.9 ms) only once the trainer asks: a 2 ms wait each step although
// either stage could serve a batch every 1.1 ms; then 8 ms of compute.
void bursty_step(const Plan& p, uint64_t i, int64_t s) {
  static const ss::NameId decode = ss::intern("decode");
  constexpr int64_t kRead = 11 * kMs / 10, kWait = 2 * kMs;
  const uint64_t sample = i + 1;
  loader->run([&] {
    ss::record_storage_read(p.at(s), p.at(s + kRead),
                            local_read("/data/shard-0", 256 << 10, sample));
    ss::record_preprocess(decode, p.at(s + kRead), p.at(s + kWait), ss::Work{sample, i + 1, 1, 0});
  });
  ss::record_batch_ready(p.at(s + kWait), i + 1, {&sample, 1});
  ss::record_data_wait(p.at(s), p.at(s + kWait), i + 1);
  kernel(p, s + kWait, s + kStep);
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
                                                 : mode == "small-files"     ? small_files_step
                                                 : mode == "bursty"          ? bursty_step
                                                                             : nullptr;
  if (step == nullptr) {
    std::fprintf(stderr, "analyzer_probe: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  LoaderThread worker;  // joined as main returns, before the recorder completes the file
  loader = &worker;
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
