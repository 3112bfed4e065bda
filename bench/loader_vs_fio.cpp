// loader_vs_fio — the loader's raw read path (no transform, no collate
// copy, no device) against fio's io_uring engine on the same file, request
// size and queue depth, side by side: throughput ratio and CPU per GB ratio
// (both sides' user+sys CPU). Then io_uring against the loader's own pread
// pool (8 threads): CPU per GB and p99 request latency.
// Rows: 1 MiB sequential O_DIRECT at QD 1, 8, 32; 128 KiB random O_DIRECT
// at QD 8, 32; 1 MiB buffered, page-cache warm, at QD 8.
//   loader_vs_fio [file_mib=256]     (needs fio in PATH; file under /tmp, removed)
#include <fcntl.h>
#include <sys/resource.h>
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

namespace sl = stallscope::loader;

namespace {

struct Row { const char* name; uint64_t bs; uint32_t qd; bool random, direct; };
struct Rate { double mb_s = 0, cpu_s_per_gb = 0; };

double cpu_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Rate run_loader(const std::string& file, uint64_t size, const Row& r) {
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
  std::unique_ptr<sl::Loader> l;
  std::string err;
  if (sl::Loader::create(ds, c, p, &l, &err) != 0) return std::fprintf(stderr, "%s\n", err.c_str()), Rate{};
  const double t0 = now_s(), c0 = cpu_now();
  l->start_epoch(0);
  sl::Batch b;
  while (l->next_batch(&b) == 0) {}
  const double t = now_s() - t0, cpu = cpu_now() - c0;
  const double gb = double(ds.total_bytes()) / 1e9;
  return {gb * 1e3 / t, cpu / gb};
}

Rate run_fio(const std::string& file, uint64_t size, const Row& r) {
  const std::string out = file + ".json";
  const std::string cmd = "fio --name=r --filename=" + file + " --rw=" + (r.random ? "randread" : "read") +
                          " --bs=" + std::to_string(r.bs) + " --iodepth=" + std::to_string(r.qd) +
                          " --ioengine=io_uring --direct=" + (r.direct ? "1" : "0") +
                          " --size=" + std::to_string(size) + " --output-format=json --output=" + out +
                          " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return {};
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return {};
  const auto& job = j["jobs"][0];
  const double bw = job["read"]["bw_bytes"].get<double>();
  const double runtime_s = job["job_runtime"].get<double>() / 1e3;
  const double cpu = (job["usr_cpu"].get<double>() + job["sys_cpu"].get<double>()) / 100 * runtime_s;
  return {bw / 1e6, cpu / (bw * runtime_s / 1e9)};
}

// Per-request latencies (us) and CPU/GB of one reader at a queue depth.
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
  uint64_t next = 0, blocks = size / r.bs, done = 0;
  sl::Completion comp[64];
  const double c0 = cpu_now();
  while (done < blocks) {
    while (next < blocks && !free_slots.empty()) {
      const uint32_t s = free_slots.back();
      const uint64_t blk = r.random ? (next * 2654435761u) % blocks : next;
      sl::ReadRequest q{fd, blk * r.bs, uint32_t(r.bs), buf + s * r.bs, s};
      if (rd->submit({&q, 1}) != 1) break;
      start[s] = now_s();
      free_slots.pop_back();
      ++next;
    }
    const int n = rd->reap(comp, 1, 1000);
    for (int i = 0; i < n; ++i, ++done) {
      lat.push_back((now_s() - start[comp[i].user_data]) * 1e6);
      free_slots.push_back(uint32_t(comp[i].user_data));
    }
  }
  const double cpu = cpu_now() - c0;
  rd.reset();
  sl::free_locked(buf, r.qd * r.bs, false);
  ::close(fd);
  std::sort(lat.begin(), lat.end());
  return {lat[lat.size() * 99 / 100], cpu / (double(size) / 1e9)};
}

void result(const std::string& name, double v, const char* unit, const char* op, double target) {
  const bool pass = std::string(op) == ">=" ? v >= target : v <= target;
  std::printf("RESULT %s %.3f %s target %s %.2f %s\n", name.c_str(), v, unit, op, target,
              pass ? "PASS" : "MISS");
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  char tmpl[] = "/tmp/stallscope-fio-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl), file = dir + "/data.bin";
  const uint64_t size = mib << 20;
  {
    std::vector<char> blk(1 << 20);
    for (size_t i = 0; i < blk.size(); ++i) blk[i] = char(i * 131);
    std::ofstream out(file, std::ios::binary);
    for (uint64_t i = 0; i < mib; ++i) out.write(blk.data(), std::streamsize(blk.size()));
  }
  const Row rows[] = {{"seq1M_direct_qd1", 1 << 20, 1, false, true},
                      {"seq1M_direct_qd8", 1 << 20, 8, false, true},
                      {"seq1M_direct_qd32", 1 << 20, 32, false, true},
                      {"rand128K_direct_qd8", 128 << 10, 8, true, true},
                      {"rand128K_direct_qd32", 128 << 10, 32, true, true},
                      {"seq1M_buffered_warm_qd8", 1 << 20, 8, false, false}};
  std::printf("%-26s %12s %12s %8s %14s %14s %8s\n", "row", "loader MB/s", "fio MB/s", "ratio",
              "loader cpu s/GB", "fio cpu s/GB", "cpu ratio");
  for (const Row& r : rows) {
    if (r.direct) sl::drop_cache(file);
    else run_fio(file, size, r);  // warms the cache
    const Rate fio = run_fio(file, size, r);
    const Rate ld = run_loader(file, size, r);
    const double ratio = fio.mb_s > 0 ? ld.mb_s / fio.mb_s : 0;
    const double cpu_ratio = fio.cpu_s_per_gb > 0 ? ld.cpu_s_per_gb / fio.cpu_s_per_gb : 0;
    std::printf("%-26s %12.0f %12.0f %8.3f %14.3f %14.3f %8.2f\n", r.name, ld.mb_s, fio.mb_s, ratio,
                ld.cpu_s_per_gb, fio.cpu_s_per_gb, cpu_ratio);
    result(std::string("loader_vs_fio_") + r.name, ratio, "ratio", ">=", 0.95);
    result(std::string("loader_vs_fio_cpu_") + r.name, cpu_ratio, "ratio", "<=", 1.0);
  }
  for (const Row& r : {rows[1], rows[4]}) {
    const auto [u_p99, u_cpu] = reader_p99(sl::Backend::kUring, file, size, r);
    const auto [p_p99, p_cpu] = reader_p99(sl::Backend::kPread, file, size, r);
    std::printf("%-26s uring p99 %.0f us, %.3f cpu s/GB; pread(8) p99 %.0f us, %.3f cpu s/GB\n",
                r.name, u_p99, u_cpu, p_p99, p_cpu);
    result(std::string("uring_vs_pread_p99_") + r.name, u_p99 / p_p99, "ratio", "<=", 1.0);
    result(std::string("uring_vs_pread_cpu_") + r.name, u_cpu / p_cpu, "ratio", "<=", 1.0);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
