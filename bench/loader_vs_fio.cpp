// loader_vs_fio — the loader's raw read path (no transform, a no-op collate,
// no device) against fio's io_uring engine on the same file, request size
// and queue depth, alternated in one run; then io_uring against the
// loader's own pread pool (8 threads) for CPU per GB and p99 latency.
// Rows: 1 MiB sequential O_DIRECT at QD 1, 8, 32; 128 KiB random O_DIRECT
// at QD 8, 32; 1 MiB buffered, page-cache warm, at QD 8. Each row runs
// `rounds` times per side, alternating which side goes first; the ratios
// are the medians of the per-round ratios (loader / fio of the same round),
// printed with their range: this VM's disk drifts by 2x within a minute.
//
// Throughput: bytes of the file / wall time of the epoch (loader) or fio's
// bw_bytes. CPU per GB: user + system CPU seconds / GB read, for
//   loader process  getrusage(RUSAGE_SELF) across the epoch: every thread
//                   (I/O, preprocessing, consumer, io-wq, pool if any);
//                   split into the I/O thread and the preprocessing thread
//                   (LoaderStats), the consumer (RUSAGE_THREAD) and the rest;
//   fio process     wait4() rusage of the fio command (fio and its job
//                   process) minus the same for a one-request fio run
//                   (start-up, parsing, forking), so setup is excluded on
//                   both sides — the ratio the target is about;
//   fio job thread  fio's own usr_cpu + sys_cpu (RUSAGE_THREAD of the job),
//                   compared with the loader's I/O thread.
// A last line runs the random QD 8 row with a no-op transform, i.e. with
// the oneTBB pool on, to show what its workers' idle spinning costs.
//   loader_vs_fio [file_mib=1024] [rounds=5]   (fio in PATH; file under /tmp, removed)
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stallscope/loader/device.hpp"
#include "stallscope/loader/loader.hpp"
#include "stallscope/loader/storage.hpp"
#include "stallscope/loader/tier.hpp"

extern char** environ;

namespace sl = stallscope::loader;

namespace {

struct Row {
  const char* name;
  uint64_t bs;
  uint32_t qd;
  bool random, direct;
};

// One side of one round; CPU in seconds.
struct Run {
  double mb_s = 0, cpu = 0, io = 0, prep = 0, consumer = 0, fio_thread = 0;
};

double seconds(const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; }
double cpu_s(int who) {
  rusage u{};
  getrusage(who, &u);
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

Run run_loader(const std::string& file, uint64_t size, const Row& r, bool transform) {
  sl::Dataset ds;
  const uint32_t f = ds.add_file(file, size);
  for (uint64_t off = 0; off + r.bs <= size; off += r.bs) ds.add_sample({f, off, r.bs});
  sl::Config c;
  c.probe = false;
  c.device = sl::DeviceKind::kNone;
  c.backend = sl::Backend::kUring;
  c.queue_depth = r.qd;
  c.read_size = r.bs;
  c.batch_size = std::max<uint32_t>(r.qd, 8);
  c.prefetch_batches = 2;
  c.shuffle = r.random;
  c.direct = r.direct ? sl::Toggle::kOn : sl::Toggle::kOff;
  sl::Pipeline p;
  p.collate = [](std::span<const sl::Sample>, std::span<std::byte>) -> int64_t { return 0; };
  if (transform) p.transform = [](sl::Sample&) { return 0; };
  std::unique_ptr<sl::Loader> l;
  std::string err;
  if (sl::Loader::create(ds, c, p, &l, &err) != 0) {
    std::fprintf(stderr, "loader: %s\n", err.c_str());
    return {};
  }
  const sl::LoaderStats s0 = l->stats();
  const double t0 = now_s(), c0 = cpu_s(RUSAGE_SELF), m0 = cpu_s(RUSAGE_THREAD);
  l->start_epoch(0);
  sl::Batch b;
  while (l->next_batch(&b) == 0) {
  }
  const double t = now_s() - t0, m = cpu_s(RUSAGE_THREAD) - m0;
  l->stop();  // joins the epoch's threads: their CPU is final
  const double cpu = cpu_s(RUSAGE_SELF) - c0;
  const sl::LoaderStats s = l->stats();
  return {double(ds.total_bytes()) / 1e6 / t,
          cpu,
          double(s.io_thread_cpu_ns - s0.io_thread_cpu_ns) * 1e-9,
          double(s.prep_thread_cpu_ns - s0.prep_thread_cpu_ns) * 1e-9,
          m,
          0};
}

// Runs argv to completion; returns the CPU seconds of it and its waited-for
// descendants (wait4), or -1.
double run_cmd(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  const int rc = posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  rusage u{};
  if (wait4(pid, &status, 0, &u) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

std::vector<std::string> fio_cmd(const std::string& file, uint64_t size, const Row& r,
                                 const std::string& out) {
  return {"fio",
          "--name=r",
          "--filename=" + file,
          std::string("--rw=") + (r.random ? "randread" : "read"),
          "--bs=" + std::to_string(r.bs),
          "--iodepth=" + std::to_string(r.qd),
          "--ioengine=io_uring",
          std::string("--direct=") + (r.direct ? "1" : "0"),
          "--size=" + std::to_string(size),
          "--invalidate=0",  // fio drops the file's cache by default: "warm" would be cold
          "--output-format=json",
          "--output=" + out};
}

// fio's own CPU outside the reads: a one-request run of the same shape.
double fio_startup_cpu(const std::string& file) {
  std::vector<double> v;
  for (int i = 0; i < 3; ++i)
    v.push_back(run_cmd(fio_cmd(file, 4096, {"", 4096, 1, false, true}, file + ".json")));
  return median(v);
}

Run run_fio(const std::string& file, uint64_t size, const Row& r, double startup) {
  const std::string out = file + ".json";
  const double tree = run_cmd(fio_cmd(file, size, r, out));
  if (tree < 0) return {};
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return {};
  const auto& job = j["jobs"][0];
  const double bw = job["read"]["bw_bytes"].get<double>();
  const double runtime_s = job["job_runtime"].get<double>() / 1e3;
  Run f;
  f.mb_s = bw / 1e6;
  f.cpu = std::max(tree - startup, 0.0);
  f.fio_thread = (job["usr_cpu"].get<double>() + job["sys_cpu"].get<double>()) / 100 * runtime_s;
  return f;
}

// Per-request latency (submit to reap, us) p99 and CPU s/GB of one reader.
std::pair<double, double> reader_p99(sl::Backend b, const std::string& file, uint64_t size,
                                     const Row& r) {
  std::string why;
  auto rd = sl::make_reader(b, {r.qd, 8}, sl::real_sys(), &why);
  const int fd = ::open(file.c_str(), O_RDONLY | O_DIRECT);
  bool locked;
  auto* buf = static_cast<char*>(sl::alloc_locked(r.qd * r.bs, false, &locked));
  std::vector<double> start(r.qd), lat;
  std::vector<uint32_t> free_slots;
  for (uint32_t i = 0; i < r.qd; ++i) free_slots.push_back(i);
  const uint64_t blocks = size / r.bs;
  uint64_t next = 0, done = 0;
  sl::Completion comp[64];
  const double c0 = cpu_s(RUSAGE_SELF);
  while (done < blocks) {
    while (next < blocks && !free_slots.empty()) {
      const uint32_t s = free_slots.back();
      const uint64_t blk = r.random ? (next * 2654435761u) % blocks : next;
      sl::ReadRequest q{fd, blk * r.bs, uint32_t(r.bs), buf + s * r.bs, s};
      const double t = now_s();  // before submit: io_uring may issue inline
      if (rd->submit({&q, 1}) != 1) break;
      start[s] = t;
      free_slots.pop_back();
      ++next;
    }
    const int n = rd->reap(comp, 1, 1000);
    for (int i = 0; i < n; ++i, ++done) {
      lat.push_back((now_s() - start[comp[i].user_data]) * 1e6);
      free_slots.push_back(uint32_t(comp[i].user_data));
    }
  }
  rd.reset();  // joins the pread threads: their CPU is counted
  const double cpu = cpu_s(RUSAGE_SELF) - c0;
  sl::free_locked(buf, r.qd * r.bs, false);
  ::close(fd);
  std::sort(lat.begin(), lat.end());
  return {lat[lat.size() * 99 / 100], cpu / (double(size) / 1e9)};
}

void result(const std::string& name, double v, const char* op, double target) {
  const bool pass = std::string(op) == ">=" ? v >= target : v <= target;
  std::printf("RESULT %s %.3f ratio target %s %.2f %s\n", name.c_str(), v, op, target,
              pass ? "PASS" : "MISS");
}

std::string make_file(uint64_t mib) {
  char tmpl[] = "/tmp/stallscope-fio-XXXXXX";
  const std::string file = std::string(::mkdtemp(tmpl)) + "/data.bin";
  std::vector<uint64_t> blk((1 << 20) / 8);
  uint64_t x = 88172645463325252ull;
  std::ofstream out(file, std::ios::binary);
  for (uint64_t i = 0; i < mib; ++i) {
    for (auto& w : blk) w = (x ^= x << 13, x ^= x >> 7, x ^= x << 17);
    out.write(reinterpret_cast<const char*>(blk.data()), std::streamsize(blk.size() * 8));
  }
  return file;
}

// One row, `rounds` times per side in alternating order: the medians of
// each side's figures, and the median and range of the per-round ratios
// (loader / fio of the same round: drift of the shared disk cancels).
struct RowResult {
  Run loader, fio;
  double ratio = 0, ratio_lo = 0, ratio_hi = 0, cpu_ratio = 0, cpu_lo = 0, cpu_hi = 0;
};

RowResult run_row(const std::string& file, uint64_t size, const Row& r, int rounds, double startup,
                  bool transform = false) {
  std::vector<Run> ld, fi;
  std::vector<double> ratio, cpu_ratio;
  for (int i = 0; i < rounds; ++i) {
    for (int side = 0; side < 2; ++side) {
      if (r.direct) sl::drop_cache(file);
      if ((side + i) % 2 == 0)
        fi.push_back(run_fio(file, size, r, startup));
      else
        ld.push_back(run_loader(file, size, r, transform));
    }
    ratio.push_back(fi.back().mb_s > 0 ? ld.back().mb_s / fi.back().mb_s : 0);
    cpu_ratio.push_back(fi.back().cpu > 0 ? ld.back().cpu / fi.back().cpu : 0);
  }
  auto med = [](const std::vector<Run>& v, double Run::*m) {
    std::vector<double> x;
    for (const Run& e : v) x.push_back(e.*m);
    return median(x);
  };
  auto all = [&](const std::vector<Run>& v) {
    return Run{med(v, &Run::mb_s), med(v, &Run::cpu),      med(v, &Run::io),
               med(v, &Run::prep), med(v, &Run::consumer), med(v, &Run::fio_thread)};
  };
  const auto [rlo, rhi] = std::minmax_element(ratio.begin(), ratio.end());
  const auto [clo, chi] = std::minmax_element(cpu_ratio.begin(), cpu_ratio.end());
  return {all(ld), all(fi), median(ratio), *rlo, *rhi, median(cpu_ratio), *clo, *chi};
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const std::string file = make_file(mib);
  const uint64_t size = mib << 20;
  const double gb = double(size) / 1e9;
  const double startup = fio_startup_cpu(file);
  const Row rows[] = {{"seq1M_direct_qd1", 1 << 20, 1, false, true},
                      {"seq1M_direct_qd8", 1 << 20, 8, false, true},
                      {"seq1M_direct_qd32", 1 << 20, 32, false, true},
                      {"rand128K_direct_qd8", 128 << 10, 8, true, true},
                      {"rand128K_direct_qd32", 128 << 10, 32, true, true},
                      {"seq1M_buffered_warm_qd8", 1 << 20, 8, false, false}};
  std::printf(
      "%llu MiB file, %d rounds per side; medians, [range] of per-round ratios; fio "
      "start-up %.3f CPU s subtracted\n",
      static_cast<unsigned long long>(mib), rounds, startup);
  std::printf("%-24s %6s %6s %-19s| CPU s/GB: %7s %6s %6s %6s %6s | %6s %6s | %-17s %6s\n", "row",
              "loader", "fio", "MB/s ratio", "process", "io", "prep", "cons", "other", "fio",
              "fiothr", "CPU ratio", "io/thr");
  std::vector<std::pair<const char*, RowResult>> results;
  for (const Row& r : rows) {
    if (!r.direct) run_fio(file, size, r, startup);  // warms the page cache
    const RowResult x = run_row(file, size, r, rounds, startup);
    const Run& ld = x.loader;
    const Run& fi = x.fio;
    const double other = std::max(ld.cpu - ld.io - ld.prep - ld.consumer, 0.0);
    std::printf(
        "%-24s %6.0f %6.0f %5.2f [%4.2f-%4.2f] | %17.3f %6.3f %6.3f %6.3f %6.3f | %6.3f "
        "%6.3f | %4.2f [%4.2f-%4.2f] %6.2f\n",
        r.name, ld.mb_s, fi.mb_s, x.ratio, x.ratio_lo, x.ratio_hi, ld.cpu / gb, ld.io / gb,
        ld.prep / gb, ld.consumer / gb, other / gb, fi.cpu / gb, fi.fio_thread / gb, x.cpu_ratio,
        x.cpu_lo, x.cpu_hi, fi.fio_thread > 0 ? ld.io / fi.fio_thread : 0);
    std::fflush(stdout);
    results.emplace_back(r.name, x);
  }
  {
    const Row& r = rows[3];
    const RowResult x = run_row(file, size, r, rounds, startup, true);
    std::printf(
        "%-24s with a no-op transform (oneTBB pool on, 2 workers): %.0f MB/s, %.3f CPU "
        "s/GB (prep thread %.3f), %.2f x fio's process\n",
        r.name, x.loader.mb_s, x.loader.cpu / gb, x.loader.prep / gb, x.cpu_ratio);
  }
  for (const auto& [name, x] : results) {
    result(std::string("loader_vs_fio_") + name, x.ratio, ">=", 0.95);
    result(std::string("loader_vs_fio_cpu_") + name, x.cpu_ratio, "<=", 1.0);
  }
  for (const Row& r : {rows[1], rows[4]}) {
    std::vector<double> u_p99, u_cpu, p_p99, p_cpu;  // alternating rounds, medians
    for (int i = 0; i < std::max(1, rounds / 2); ++i) {
      sl::drop_cache(file);
      const auto u = reader_p99(sl::Backend::kUring, file, size, r);
      sl::drop_cache(file);
      const auto p = reader_p99(sl::Backend::kPread, file, size, r);
      u_p99.push_back(u.first), u_cpu.push_back(u.second);
      p_p99.push_back(p.first), p_cpu.push_back(p.second);
    }
    std::printf("%-24s uring p99 %.0f us, %.3f CPU s/GB; pread(8) p99 %.0f us, %.3f CPU s/GB\n",
                r.name, median(u_p99), median(u_cpu), median(p_p99), median(p_cpu));
    result(std::string("uring_vs_pread_p99_") + r.name, median(u_p99) / median(p_p99), "<=", 1.0);
    result(std::string("uring_vs_pread_cpu_") + r.name, median(u_cpu) / median(p_cpu), "<=", 1.0);
  }
  std::filesystem::remove_all(std::filesystem::path(file).parent_path());
  return 0;
}
