// loader_vs_fio — the loader's raw read path (no transform, a no-op collate,
// no device) against fio's io_uring engine on the same file, request size
// and queue depth; then io_uring against the loader's own pread pool
// (8 threads) for CPU per GB and p99 latency.
// Rows: 1 MiB sequential O_DIRECT at QD 1, 8, 32; 128 KiB random O_DIRECT
// at QD 8, 32; 1 MiB buffered, page-cache warm, at QD 8.
//
// Method (both sides the same way):
//   time-based   each side runs `chunk_s` seconds after a `ramp_s` ramp:
//                fio --time_based --runtime --ramp_time; the loader reads
//                an epoch listing its region many times over and is
//                stopped at the deadline. Throughput is bytes in the steady
//                window / its time: fio's bw_bytes (ramp excluded), the
//                loader's batches delivered after the ramp / the time from
//                the ramp's last batch to the last one.
//   regions      the file is cut into 4 regions (--offset/--size for fio,
//                the samples of that range for the loader); compared runs
//                rotate over regions 0-2, so no run reads the region the
//                run just before it read; region 3 is the reference's.
//   order        an even number of rounds in ABBA order (LF FL LF FL ...):
//                each side reads first as often as second.
//   reference    the device limit: one separate fio run of the row's shape,
//                `ref_s` (>= 8) seconds after a 1 s ramp, on region 3.
//                A row whose compared fio median reaches < 80 % of it gets
//                a second reference after it (a device that slowed during
//                the row slowed both sides) and is judged by the slower;
//                below both, the row runs once more, and below both again
//                it is INVALID (fio did not reach the disk), not PASS/MISS.
//   diskstats    each side's /proc/diskstats delta of the file's block
//                device (reads, sectors, ms in queue), summed over its
//                rounds; a side that delivered more bytes than the device
//                moved was served from a cache (flagged "cached"; expected
//                in the warm row). The counters are the whole device's:
//                other programs' reads only add to them.
//   buffers      by default (pages=4k) both sides on the system's default
//                pages: the loader with HUGE_PAGES off (no MADV_HUGEPAGE),
//                fio's malloc'd buffers; 4 KiB pages unless THP is
//                "always" (then THP for both). pages=huge: the loader's on
//                2 MiB THP pages (madvise), fio's in hugetlb pages
//                (--iomem=shmhuge) when enough are reserved
//                (vm.nr_hugepages), else the O_DIRECT rows are INVALID: on
//                a virtio disk a 1 MiB O_DIRECT read from 4 KiB pages is
//                several times slower than from one page. The footprint
//                control and the p99 lines use the same pages.
//   huge pages   one line for what they buy: on the 1 MiB sequential
//                O_DIRECT QD 8 row, the loader with HUGE_PAGES on against
//                itself with it off, ABBA over `rounds` on the rotating
//                regions (median of the per-round ratios).
//   footprint    after each row, a control: the row's reads from the
//                loader's own io_uring reader in a bare loop (no batches,
//                no consumer, no trace), time-based as above, at fio's
//                buffer footprint (QD x request size) and at the loader's
//                (PREFETCH + 1 slots of a batch), with fio beside, over
//                `rounds` (fio, fio's footprint, the loader's, then the
//                reverse). Its ratio is what the footprint alone costs on
//                this machine; the row's ratio over it ("net") is the
//                loader's own, each with a RESULT line; the loop at fio's
//                footprint against fio compares the reader with fio's
//                engine on the same buffers. The loader's footprint is
//                what it allocates; a batch takes the arena released
//                last, so the buffers it keeps in use can be fewer, and
//                the net above 1.
// CPU per GB: steady window only — the loader process's getrusage
// (RUSAGE_SELF: every thread, io-wq included) between the ramp's last
// batch and the deadline / steady bytes; fio's job thread usr_cpu+sys_cpu
// (fio's own figures, ramp excluded) / its io_bytes. The loader's is also
// split by thread (/proc/self/task/*/schedstat): its I/O thread, the
// consumer, the recorder's threads. fio's io_uring
// options are its defaults (fixedbufs, registerfiles, sqthread_poll, hipri
// off); the loader's registered-buffer reads are printed beside.
// The loader is measured as shipped, recording its trace; after the rows
// the random QD 8 row runs again (2 rounds each) with a no-op transform,
// at BATCH_SIZE 64 and untraced (capture off), and the warm row at
// PREFETCH 1 and against fio at QD 40 (the loader's buffer footprint),
// for what each costs.
//   loader_vs_fio [file_mib=2048] [rounds=8] [chunk_s=1] [ref_s=8] [rows=all] [pages=4k]
//   (rows: a comma-separated list of row names, e.g. for a profile of one;
//   the extra lines run with their row; pages: 4k or huge, as above)
//   (fio in PATH; file under /tmp, removed)
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stallscope/loader/device.hpp"
#include "stallscope/loader/loader.hpp"
#include "stallscope/loader/storage.hpp"
#include "stallscope/loader/tier.hpp"
#include "stallscope/trace.h"

#include "loader_vs_fio_logic.hpp"

extern char** environ;

namespace sl = stallscope::loader;

namespace {

struct Row {
  const char* name;
  uint64_t bs;
  uint32_t qd;
  bool random, direct;
};

struct Region {
  uint64_t off, len;
};

using stallscope::bench::Disk;
using stallscope::bench::FioBuffers;
using stallscope::bench::loader_first;
using stallscope::bench::parse_diskstats;

struct DiskReader {
  unsigned major = 0, minor = 0;
  bool ok = false;
  Disk read() const {
    Disk d;
    if (!ok) return d;
    std::ifstream in("/proc/diskstats");
    std::stringstream s;
    s << in.rdbuf();
    parse_diskstats(s.str(), major, minor, &d);
    return d;
  }
};

DiskReader disk_of(const std::string& file) {
  struct stat st{};
  DiskReader r;
  if (::stat(file.c_str(), &st) != 0) return r;
  r.major = ::major(st.st_dev), r.minor = ::minor(st.st_dev);
  Disk d;
  std::ifstream in("/proc/diskstats");
  std::stringstream s;
  s << in.rdbuf();
  r.ok = parse_diskstats(s.str(), r.major, r.minor, &d);
  return r;
}

// One side of one round: steady-window throughput and CPU, bytes delivered
// over the whole run (ramp included) and the device's delta meanwhile.
struct Run {
  double mb_s = 0, cpu_gb = 0, delivered = 0;
  Disk disk;
  uint64_t fixed = 0;
  double io_gb = 0, consumer_gb = 0, recorder_gb = 0;  // the loader's cpu_gb by thread
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
// CPU seconds of this process's threads by role, from
// /proc/self/task/*/schedstat (run time, ns) and comm: the loader's I/O
// thread ("ss-loader-io"), the main thread (the bench's consumer) and the
// recorder's threads ("stallscope-*": the CPU sampler, the flusher).
struct ThreadCpu {
  double io = 0, consumer = 0, recorder = 0;
};
ThreadCpu thread_cpu() {
  ThreadCpu c;
  const std::string self = std::to_string(::getpid());
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(e.path() / "comm"), sched(e.path() / "schedstat");
    std::string name;
    double ns = 0;
    if (!std::getline(comm, name) || !(sched >> ns)) continue;  // the thread has ended
    const double t = ns * 1e-9;
    if (e.path().filename() == self)
      c.consumer += t;
    else if (name.rfind("ss-loader-io", 0) == 0)
      c.io += t;
    else if (name.rfind("stallscope-", 0) == 0)
      c.recorder += t;
  }
  return c;
}

// /proc/loadavg's first three fields ("?" if unreadable): printed before
// and after a run so that a figure says what load it was measured under.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "?";
  return a + " " + b + " " + c;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
Disk delta(const Disk& a, const Disk& b) {
  return {b.reads - a.reads, b.sectors - a.sectors, b.queue_ms - a.queue_ms};
}

// The loader's BATCH_SIZE for a row: a batch keeps the queue full.
uint32_t default_batch(const Row& r) { return std::max<uint32_t>(r.qd, 8); }

// How the loader side runs, beyond the row's shape.
struct LoaderOpts {
  bool transform = false;  // a no-op transform: the oneTBB pool on
  uint32_t batch = 0;      // BATCH_SIZE; 0: default_batch()
  uint32_t prefetch = 0;   // PREFETCH; 0: the loader's default
  bool traced = true;      // false: capture off, the loader records nothing
  int huge_pages = -1;     // HUGE_PAGES 1 on, 0 off; -1: the bench's pages
};

// The pages the compared sides use (the pages argument).
sl::Pages g_pages = sl::Pages::kBase;

// Runs the loader on `reg` for ramp + chunk seconds (the epoch lists the
// region's samples enough times over not to end first).
Run run_loader(const std::string& file, uint64_t size, const Row& r, Region reg, double ramp,
               double chunk, const LoaderOpts& o, const DiskReader& dr) {
  sl::Dataset ds;
  const uint32_t f = ds.add_file(file, size);
  // Bytes/s, generous: seq QD 8 O_DIRECT reached 3.9 GB/s and the warm row
  // 24 GB/s on a 2-core VM; an epoch that ends first is reported below.
  const double max_rate = r.direct ? 16e9 : 64e9;
  const uint64_t passes =
      std::max<uint64_t>(1, uint64_t(max_rate * (ramp + chunk) / double(reg.len)) + 1);
  for (uint64_t p = 0; p < passes; ++p)
    for (uint64_t off = reg.off; off + r.bs <= reg.off + reg.len; off += r.bs)
      ds.add_sample({f, off, r.bs});
  sl::Config c;
  c.probe = false;
  c.device = sl::DeviceKind::kNone;
  c.backend = sl::Backend::kUring;
  c.queue_depth = r.qd;
  c.read_size = r.bs;
  c.batch_size = o.batch ? o.batch : default_batch(r);
  if (o.prefetch) c.prefetch_batches = o.prefetch;
  c.shuffle = r.random;
  c.direct = r.direct ? sl::Toggle::kOn : sl::Toggle::kOff;
  c.huge_pages = o.huge_pages < 0 ? g_pages == sl::Pages::kHuge : o.huge_pages == 1;
  sl::Pipeline p;
  p.collate = [](std::span<const sl::Sample>, std::span<std::byte>) -> int64_t { return 0; };
  if (o.transform) p.transform = [](sl::Sample&) { return 0; };
  // Untraced: the loader records nothing (fio records nothing either).
  struct Capture {
    int was = stallscope_capture_enabled();
    explicit Capture(bool on) { stallscope_capture_set(on ? was : 0); }
    ~Capture() { stallscope_capture_set(was); }
  } capture(o.traced);
  std::unique_ptr<sl::Loader> l;
  std::string err;
  if (sl::Loader::create(ds, c, p, &l, &err) != 0) {
    std::fprintf(stderr, "loader: %s\n", err.c_str());
    return {};
  }
  const sl::LoaderStats s0 = l->stats();
  const Disk d0 = dr.read();
  const double t0 = now_s();
  l->start_epoch(0);
  sl::Batch b;
  double tr = 0, cr = 0, tl = 0, cl = 0;
  ThreadCpu th0;
  uint64_t steady = 0, all = 0;
  bool deadline = false;
  while (l->next_batch(&b) == 0) {
    const double t = now_s();
    uint64_t n = 0;
    for (const auto& s : b.samples) n += s.bytes.size();
    all += n;
    if (t < t0 + ramp) {
      tr = t;  // the ramp's last batch so far
      continue;
    }
    if (steady == 0 && tr == 0) tr = t0;
    if (cr == 0) th0 = thread_cpu(), cr = cpu_s(RUSAGE_SELF);
    steady += n;
    tl = t;
    if ((deadline = t >= t0 + ramp + chunk)) break;
  }
  cl = cpu_s(RUSAGE_SELF);
  const ThreadCpu th1 = thread_cpu();
  // The epoch's end stops the I/O thread: its CPU by thread would be lost.
  if (!deadline)
    std::fprintf(stderr, "loader: %s: the epoch ended %.2f s before the deadline (%s)\n", r.name,
                 t0 + ramp + chunk - now_s(), l->error().c_str());
  l->stop();
  const Disk d1 = dr.read();
  const sl::LoaderStats s = l->stats();
  Run out;
  if (tl > tr && steady > 0) out.mb_s = double(steady) / 1e6 / (tl - tr);
  out.cpu_gb = steady ? (cl - cr) / (double(steady) / 1e9) : 0;
  if (steady) {
    const double gb = double(steady) / 1e9;
    out.io_gb = (th1.io - th0.io) / gb, out.consumer_gb = (th1.consumer - th0.consumer) / gb,
    out.recorder_gb = (th1.recorder - th0.recorder) / gb;
  }
  out.delivered = double(all);
  out.disk = delta(d0, d1);
  out.fixed = s.fixed_reads - s0.fixed_reads;
  return out;
}

// Runs argv to completion; 0, or -1.
int run_cmd(const std::vector<std::string>& argv) {
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
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return 0;
}

FioBuffers g_buffers;  // set once in main

std::string slurp_file(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> fio_cmd(const std::string& file, const Row& r, Region reg, double ramp,
                                 double runtime, const std::string& out) {
  std::vector<std::string> a = {"fio",
          "--name=r",
          "--filename=" + file,
          std::string("--rw=") + (r.random ? "randread" : "read"),
          "--bs=" + std::to_string(r.bs),
          "--iodepth=" + std::to_string(r.qd),
          "--ioengine=io_uring",
          std::string("--direct=") + (r.direct ? "1" : "0"),
          "--offset=" + std::to_string(reg.off),
          "--size=" + std::to_string(reg.len),
          "--time_based",
          "--runtime=" + std::to_string(int(runtime * 1000)) + "ms",
          "--ramp_time=" + std::to_string(int(ramp * 1000)) + "ms",
          "--invalidate=0",  // fio drops the file's cache by default: "warm" would be cold
          "--output-format=json",
          "--output=" + out};
  if (g_buffers.fio_shmhuge) a.push_back("--iomem=shmhuge");  // hugetlb pages, as the loader's THP
  return a;
}

Run run_fio(const std::string& file, const Row& r, Region reg, double ramp, double runtime,
            const DiskReader& dr) {
  const std::string out = file + ".json";
  const Disk d0 = dr.read();
  if (run_cmd(fio_cmd(file, r, reg, ramp, runtime, out)) != 0) return {};
  const Disk d1 = dr.read();
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return {};
  const auto& job = j["jobs"][0];
  const double bw = job["read"]["bw_bytes"].get<double>();
  const double io = job["read"]["io_bytes"].get<double>();
  const double runtime_s = job["job_runtime"].get<double>() / 1e3;
  Run f;
  f.mb_s = bw / 1e6;
  const double cpu = (job["usr_cpu"].get<double>() + job["sys_cpu"].get<double>()) / 100 * runtime_s;
  f.cpu_gb = io > 0 ? cpu / (io / 1e9) : 0;
  // Ramp bytes are not in io_bytes: the delivered total is estimated at
  // the steady rate over ramp + runtime (too high when the ramp ran slower).
  f.delivered = io + bw * ramp;
  f.disk = delta(d0, d1);
  return f;
}

// The footprint control: the row's reads from the loader's own io_uring
// reader in a bare loop (no batches, no consumer thread, no trace) into
// `bytes` of buffers used round robin, time-based and measured as the
// loader side (bytes completed after the ramp / the time from the ramp's
// last completion to the last one; CPU of the process meanwhile). Run at
// fio's footprint and at the loader's, it measures what the footprint
// alone costs on this machine.
Run run_bare(const std::string& file, const Row& r, Region reg, uint64_t bytes, double ramp,
             double chunk, const DiskReader& dr) {
  std::string why;
  auto rd = sl::make_reader(sl::Backend::kUring, {r.qd, 8}, sl::real_sys(), &why);
  if (!rd) {
    std::fprintf(stderr, "footprint control: no io_uring reader: %s\n", why.c_str());
    return {};
  }
  const int fd = ::open(file.c_str(), O_RDONLY | (r.direct ? O_DIRECT : 0));
  if (fd < 0) {
    std::fprintf(stderr, "footprint control: %s: %s\n", file.c_str(), std::strerror(errno));
    return {};
  }
  const uint64_t slots = std::max<uint64_t>(r.qd, bytes / r.bs);
  bool locked = false;
  auto* buf = static_cast<char*>(sl::alloc_locked(slots * r.bs, false, &locked, g_pages));
  if (buf == nullptr) {
    ::close(fd);
    std::fprintf(stderr, "footprint control: cannot map %llu bytes\n",
                 static_cast<unsigned long long>(slots * r.bs));
    return {};
  }
  std::memset(buf, 0, slots * r.bs);  // faulted in before the clock starts
  const uint64_t blocks = reg.len / r.bs;
  uint64_t x = 88172645463325252ull, next = 0, steady = 0, all = 0;
  uint32_t in_flight = 0;
  std::vector<sl::ReadRequest> q;
  q.reserve(r.qd);
  std::vector<sl::Completion> comp(r.qd);
  bool stop = false, failed = false;
  const Disk d0 = dr.read();
  const double t0 = now_s();
  double tr = t0, tl = 0, cr = 0, cl = 0;
  while (!stop || in_flight > 0) {
    q.clear();
    while (!stop && in_flight + q.size() < r.qd) {
      uint64_t blk = next % blocks;
      if (r.random) x ^= x << 13, x ^= x >> 7, x ^= x << 17, blk = x % blocks;
      q.push_back({fd, reg.off + blk * r.bs, uint32_t(r.bs), buf + (next % slots) * r.bs, next});
      ++next;
    }
    if (!q.empty()) {
      const int n = rd->submit(q);
      if (n < 0) {
        failed = true;
        if (in_flight == 0) break;
        stop = true;
      } else {
        in_flight += uint32_t(n);
      }
    }
    const int n = rd->reap(comp, 1, 1000);
    if (n < 0) {
      failed = true;
      break;
    }
    const double t = now_s();
    for (int i = 0; i < n; ++i) {
      --in_flight;
      if (comp[size_t(i)].res != int32_t(r.bs)) failed = stop = true;
      if (stop) continue;
      all += r.bs;
      if (t < t0 + ramp) {
        tr = t;
        continue;
      }
      if (cr == 0) cr = cpu_s(RUSAGE_SELF);
      steady += r.bs;
      tl = t;
    }
    if (!stop && t >= t0 + ramp + chunk) stop = true, cl = cpu_s(RUSAGE_SELF);
  }
  const Disk d1 = dr.read();
  rd.reset();
  sl::free_locked(buf, slots * r.bs, false);
  ::close(fd);
  Run out;
  if (failed) {
    std::fprintf(stderr, "footprint control: a read failed or came back short\n");
    return out;
  }
  if (tl > tr && steady > 0) out.mb_s = double(steady) / 1e6 / (tl - tr);
  out.cpu_gb = steady && cl > cr ? (cl - cr) / (double(steady) / 1e9) : 0;
  out.delivered = double(all);
  out.disk = delta(d0, d1);
  return out;
}

// Per-request latency (submit to reap, us) p99 and CPU s/GB of one reader.
std::pair<double, double> reader_p99(sl::Backend b, const std::string& file, uint64_t size,
                                     const Row& r) {
  std::string why;
  auto rd = sl::make_reader(b, {r.qd, 8}, sl::real_sys(), &why);
  const int fd = ::open(file.c_str(), O_RDONLY | O_DIRECT);
  bool locked;
  auto* buf = static_cast<char*>(sl::alloc_locked(r.qd * r.bs, false, &locked, g_pages));
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

void result(const std::string& name, double v, const char* op, double target, bool valid) {
  const bool pass = std::string(op) == ">=" ? v >= target : v <= target;
  std::printf("RESULT %s %.3f ratio target %s %.2f %s\n", name.c_str(), v, op, target,
              !valid ? "INVALID" : pass ? "PASS" : "MISS");
}

// The bench's directory and files, for a SIGINT/SIGTERM handler to remove
// (unlink and rmdir are async-signal-safe): a stopped run leaves no 2 GiB
// file behind.
char g_dir[64], g_data[96], g_json[112];
extern "C" void remove_and_exit(int sig) {
  ::unlink(g_json);
  ::unlink(g_data);
  ::rmdir(g_dir);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

std::string make_file(uint64_t mib) {
  std::string tmpl = "/tmp/stallscope-fio-" + std::string(6, 'X');  // mkdtemp(3)'s template
  const char* dir = ::mkdtemp(tmpl.data());
  if (dir == nullptr) {
    std::fprintf(stderr, "loader_vs_fio: cannot make a directory under /tmp: %s\n", std::strerror(errno));
    std::exit(1);
  }
  const std::string file = std::string(dir) + "/data.bin";
  std::snprintf(g_dir, sizeof g_dir, "%s", dir);
  std::snprintf(g_data, sizeof g_data, "%s", file.c_str());
  std::snprintf(g_json, sizeof g_json, "%s.json", file.c_str());
  ::signal(SIGINT, remove_and_exit);
  ::signal(SIGTERM, remove_and_exit);
  std::vector<uint64_t> blk((1 << 20) / 8);
  uint64_t x = 88172645463325252ull;
  std::ofstream out(file, std::ios::binary);
  for (uint64_t i = 0; i < mib; ++i) {
    for (auto& w : blk) w = (x ^= x << 13, x ^= x >> 7, x ^= x << 17);
    out.write(reinterpret_cast<const char*>(blk.data()), std::streamsize(blk.size() * 8));
  }
  return file;
}

struct RowResult {
  double ref = 0, loader = 0, fio = 0, ratio = 0, lo = 0, hi = 0, cpu_l = 0, cpu_f = 0,
         cpu_ratio = 0;
  double del_l = 0, del_f = 0;
  double io_l = 0, consumer_l = 0, recorder_l = 0;  // cpu_l by thread (medians)
  Disk disk_l, disk_f;
  uint64_t fixed = 0;
  bool valid = false;
  double ref_after = 0;  // a second reference, after a row below the first (0: none)
};

void add(Disk* a, const Disk& b) { a->reads += b.reads, a->sectors += b.sectors, a->queue_ms += b.queue_ms; }

RowResult run_row(const std::string& file, uint64_t size, const Row& r, int rounds, double ramp,
                  double chunk, double ref_s, const Region* reg, const DiskReader& dr,
                  const LoaderOpts& o = {}, uint32_t fio_qd = 0) {
  Row fr = r;  // fio's side: the row, or another queue depth
  if (fio_qd) fr.qd = fio_qd;
  RowResult x;
  if (r.direct) sl::drop_cache(file);
  x.ref = ref_s > 0 ? run_fio(file, r, reg[3], 1.0, ref_s, dr).mb_s : 0;
  std::vector<double> ld, fi, ratio, cl, cf, io, consumer, recorder;
  int k = 0;  // compared runs so far: region k % 3
  for (int i = 0; i < rounds; ++i) {
    Run a, b;
    for (int side = 0; side < 2; ++side) {
      const bool loader = (side == 0) == loader_first(i);
      const Region g = reg[k++ % 3];
      if (r.direct) sl::drop_cache(file);
      if (loader)
        a = run_loader(file, size, r, g, ramp, chunk, o, dr);
      else
        b = run_fio(file, fr, g, ramp, chunk, dr);
    }
    ld.push_back(a.mb_s), fi.push_back(b.mb_s), cl.push_back(a.cpu_gb), cf.push_back(b.cpu_gb);
    io.push_back(a.io_gb), consumer.push_back(a.consumer_gb), recorder.push_back(a.recorder_gb);
    ratio.push_back(b.mb_s > 0 ? a.mb_s / b.mb_s : 0);
    x.del_l += a.delivered, x.del_f += b.delivered;
    add(&x.disk_l, a.disk), add(&x.disk_f, b.disk);
    x.fixed += a.fixed;
  }
  x.loader = median(ld), x.fio = median(fi), x.ratio = median(ratio);
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  x.lo = *lo, x.hi = *hi;
  x.cpu_l = median(cl), x.cpu_f = median(cf);
  x.io_l = median(io), x.consumer_l = median(consumer), x.recorder_l = median(recorder);
  x.cpu_ratio = x.cpu_f > 0 ? x.cpu_l / x.cpu_f : 0;
  x.valid = stallscope::bench::row_valid(x.fio, x.ref, ref_s > 0);
  if (!x.valid && ref_s > 0) {  // did the device slow down during the row?
    if (r.direct) sl::drop_cache(file);
    x.ref_after = run_fio(file, r, reg[3], 1.0, ref_s, dr).mb_s;
    x.valid = stallscope::bench::row_valid_bracketed(x.fio, x.ref, x.ref_after, true);
  }
  return x;
}

// The footprint control of a row: the bare loop at fio's footprint (QD
// buffers of the request size) and at the loader's (PREFETCH + 1 slots of
// one batch), and fio, over `rounds` on the rotating regions, in the order
// fio, fio's footprint, the loader's, then the reverse (each side first
// and last equally often).
struct Control {
  uint64_t small = 0, large = 0;  // bytes of buffers
  double mb_small = 0, mb_large = 0, cpu_small = 0, cpu_large = 0, mb_fio = 0, cpu_fio = 0;
  double ratio = 0, cpu_ratio = 0;    // medians of the per-round large / small
  double reader = 0, cpu_reader = 0;  // medians of the per-round small / fio
};

Control footprint_control(const std::string& file, const Row& r, int rounds, double ramp,
                          double chunk, const Region* reg, const DiskReader& dr) {
  Control c;
  c.small = uint64_t(r.qd) * r.bs;
  c.large = uint64_t(sl::Config{}.prefetch_batches + 1) * default_batch(r) * r.bs;
  std::vector<double> ms, ml, mf, cs, cl, cf, ratio, cpu, reader, cpu_reader;
  int k = 0;
  for (int i = 0; i < rounds; ++i) {
    Run run[3];  // fio, fio's footprint, the loader's
    for (int n = 0; n < 3; ++n) {
      const int side = loader_first(i) ? n : 2 - n;
      if (r.direct) sl::drop_cache(file);
      const Region g = reg[k++ % 3];
      run[side] = side == 0 ? run_fio(file, r, g, ramp, chunk, dr)
                            : run_bare(file, r, g, side == 1 ? c.small : c.large, ramp, chunk, dr);
    }
    const Run &f = run[0], &a = run[1], &b = run[2];
    ms.push_back(a.mb_s), ml.push_back(b.mb_s), mf.push_back(f.mb_s);
    cs.push_back(a.cpu_gb), cl.push_back(b.cpu_gb), cf.push_back(f.cpu_gb);
    ratio.push_back(a.mb_s > 0 ? b.mb_s / a.mb_s : 0);
    cpu.push_back(a.cpu_gb > 0 ? b.cpu_gb / a.cpu_gb : 0);
    reader.push_back(f.mb_s > 0 ? a.mb_s / f.mb_s : 0);
    cpu_reader.push_back(f.cpu_gb > 0 ? a.cpu_gb / f.cpu_gb : 0);
  }
  c.mb_small = median(ms), c.mb_large = median(ml), c.mb_fio = median(mf);
  c.cpu_small = median(cs), c.cpu_large = median(cl), c.cpu_fio = median(cf);
  c.ratio = median(ratio), c.cpu_ratio = median(cpu);
  c.reader = median(reader), c.cpu_reader = median(cpu_reader);
  return c;
}

// What huge pages buy the loader: HUGE_PAGES on against off on the row's
// shape, ABBA over `rounds` on the rotating regions; the per-round ratio
// is on ÷ off.
struct PagesGain {
  double huge = 0, base = 0, ratio = 0, lo = 0, hi = 0;
};

PagesGain huge_vs_base(const std::string& file, uint64_t size, const Row& r, int rounds,
                       double ramp, double chunk, const Region* reg, const DiskReader& dr) {
  std::vector<double> on, off, ratio;
  int k = 0;
  for (int i = 0; i < rounds; ++i) {
    Run a, b;
    for (int side = 0; side < 2; ++side) {
      const bool huge = (side == 0) == loader_first(i);
      if (r.direct) sl::drop_cache(file);
      (huge ? a : b) =
          run_loader(file, size, r, reg[k++ % 3], ramp, chunk, {.huge_pages = huge ? 1 : 0}, dr);
    }
    on.push_back(a.mb_s), off.push_back(b.mb_s);
    ratio.push_back(b.mb_s > 0 ? a.mb_s / b.mb_s : 0);
  }
  PagesGain g;
  g.huge = median(on), g.base = median(off), g.ratio = median(ratio);
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  g.lo = *lo, g.hi = *hi;
  return g;
}

const char* cached(double delivered, const Disk& d) {
  return stallscope::bench::served_from_cache(delivered, d) ? " cached" : "";
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2048;
  int rounds = argc > 2 ? std::max(2, std::atoi(argv[2])) : 8;
  rounds += rounds % 2;  // ABBA needs an even number
  const double chunk = argc > 3 ? std::max(0.5, std::atof(argv[3])) : 1.0;
  const double ref_s = argc > 4 ? std::max(8.0, std::atof(argv[4])) : 8.0;
  const double ramp = 0.5;
  const std::string rows_arg = argc > 5 ? argv[5] : "all";
  const std::string only = rows_arg == "all" || rows_arg.empty() ? "" : "," + rows_arg + ",";
  const std::string pages_arg = argc > 6 ? argv[6] : "4k";
  if (pages_arg != "4k" && pages_arg != "huge") {
    std::fprintf(stderr, "loader_vs_fio: pages must be 4k or huge, not '%s'\n", pages_arg.c_str());
    return 2;
  }
  g_pages = pages_arg == "huge" ? sl::Pages::kHuge : sl::Pages::kBase;
  auto selected = [&](const char* name) {
    return only.empty() || only.find(std::string(",") + name + ",") != std::string::npos;
  };
  const Row rows[] = {{"seq1M_direct_qd1", 1 << 20, 1, false, true},
                      {"seq1M_direct_qd8", 1 << 20, 8, false, true},
                      {"seq1M_direct_qd32", 1 << 20, 32, false, true},
                      {"rand128K_direct_qd8", 128 << 10, 8, true, true},
                      {"rand128K_direct_qd32", 128 << 10, 32, true, true},
                      {"seq1M_buffered_warm_qd8", 1 << 20, 8, false, false}};
  if (!only.empty()) {  // every name asked for must be a row
    std::string known, name;
    for (const Row& r : rows) known += std::string(known.empty() ? "" : ", ") + r.name;
    std::istringstream names(rows_arg);
    while (std::getline(names, name, ','))
      if (std::none_of(std::begin(rows), std::end(rows),
                       [&](const Row& r) { return name == r.name; })) {
        std::fprintf(stderr, "loader_vs_fio: no row named '%s' (rows: %s)\n", name.c_str(),
                     known.c_str());
        return 2;
      }
  }
  const std::string file = make_file(mib);
  const uint64_t size = mib << 20;
  const uint64_t q = (size / 4) & ~uint64_t((1 << 20) - 1);
  const Region reg[4] = {{0, q}, {q, q}, {2 * q, q}, {3 * q, q}};
  const DiskReader dr = disk_of(file);
  std::printf("loadavg at start: %s (%ld CPUs online)\n", loadavg().c_str(),
              ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf(
      "%llu MiB file, 4 regions of %llu MiB; %d rounds ABBA, %.1f s ramp + %.1f s per side; "
      "reference fio %.0f s + 1 s ramp on region 3; device %u:%u%s\n",
      static_cast<unsigned long long>(mib), static_cast<unsigned long long>(q >> 20), rounds,
      ramp, chunk, ref_s, dr.major, dr.minor, dr.ok ? "" : " (not in /proc/diskstats)");
  std::printf("fio: --ioengine=io_uring defaults (fixedbufs=0 registerfiles=0 sqthread_poll=0 "
              "hipri=0)\n");
  // fio's largest job: 32 x 1 MiB in flight, with room for fio's own.
  const std::string thp = slurp_file("/sys/kernel/mm/transparent_hugepage/enabled");
  g_buffers = stallscope::bench::fio_buffers(thp, slurp_file("/proc/meminfo"), 48ull << 20,
                                             g_pages == sl::Pages::kHuge);
  if (!g_buffers.advised)
    std::printf("buffers (pages=4k): loader HUGE_PAGES=off, fio malloc: both on the system's "
                "default pages, %s; pages=huge compares on huge pages\n",
                g_buffers.loader_huge ? "THP (\"always\") where the kernel backs them"
                                      : "4 KiB pages");
  else
    std::printf("buffers (pages=huge): loader %s; fio %s%s\n",
                g_buffers.loader_huge ? "2 MiB THP pages (madvise)" : "4 KiB pages (THP off)",
                g_buffers.fio_shmhuge ? "hugetlb pages (--iomem=shmhuge)" : "4 KiB pages (malloc)",
                g_buffers.like_for_like()
                    ? ""
                    : ": NOT like for like, the O_DIRECT rows are INVALID; reserve hugetlb pages "
                      "(sysctl vm.nr_hugepages=32, 64 MiB), or compare on 4 KiB pages (pages=4k)");
  std::printf("%-24s %6s %6s %6s %-19s| CPU s/GB %6s %6s %5s | disk loader: %-27s | fio: %-27s\n",
              "row", "ref", "loader", "fio", "MB/s ratio", "loader", "fio", "ratio",
              "GB deliv/dev reads qms", "GB deliv/dev reads qms");
  struct Result {
    const char* name;
    RowResult x;
    Control c;
  };
  std::vector<Result> results;
  for (const Row& r : rows) {
    if (!selected(r.name)) continue;
    if (!r.direct)  // warms the page cache over the whole file
      run_cmd({"sh", "-c", "cat '" + file + "' > /dev/null"});
    RowResult x = run_row(file, size, r, rounds, ramp, chunk, ref_s, reg, dr);
    if (!x.valid) {  // below both references: once more, the disk may have settled
      std::printf("# %s: compared fio %.0f MB/s < 80 %% of the references %.0f (before) and %.0f "
                  "(after) MB/s: running the row again\n",
                  r.name, x.fio, x.ref, x.ref_after);
      std::fflush(stdout);
      x = run_row(file, size, r, rounds, ramp, chunk, ref_s, reg, dr);
    }
    const double gl = double(x.disk_l.sectors) * 512 / 1e9, gf = double(x.disk_f.sectors) * 512 / 1e9;
    std::printf(
        "%-24s %6.0f %6.0f %6.0f %5.2f [%4.2f-%4.2f] | %15.3f %6.3f %5.2f | %5.1f/%5.1f %7llu "
        "%6llu%-7s | %5.1f/%5.1f %7llu %6llu%-7s\n",
        r.name, x.ref, x.loader, x.fio, x.ratio, x.lo, x.hi, x.cpu_l, x.cpu_f, x.cpu_ratio,
        x.del_l / 1e9, gl, static_cast<unsigned long long>(x.disk_l.reads),
        static_cast<unsigned long long>(x.disk_l.queue_ms), cached(x.del_l, x.disk_l),
        x.del_f / 1e9, gf, static_cast<unsigned long long>(x.disk_f.reads),
        static_cast<unsigned long long>(x.disk_f.queue_ms), cached(x.del_f, x.disk_f));
    if (x.fixed) std::printf("%-24s loader: %llu reads into registered buffers\n", r.name,
                             static_cast<unsigned long long>(x.fixed));
    std::printf("%-24s loader CPU s/GB by thread: I/O %.4f, consumer %.4f, recorder %.4f, "
                "rest %.4f (io-wq, ended threads); fio %.4f\n",
                r.name, x.io_l, x.consumer_l, x.recorder_l,
                std::max(0.0, x.cpu_l - x.io_l - x.consumer_l - x.recorder_l), x.cpu_f);
    std::fflush(stdout);
    const Control c = footprint_control(file, r, rounds, ramp, chunk, reg, dr);
    std::printf("%-24s footprint control (bare io_uring loop): %llu MiB %.0f MB/s %.3f s/GB, "
                "%llu MiB (the loader's) %.0f MB/s %.3f s/GB: %.2f x MB/s, %.2f x CPU; fio "
                "beside %.0f MB/s %.3f s/GB: the loop at fio's footprint %.2f x fio's MB/s, %.2f "
                "x CPU\n",
                r.name, static_cast<unsigned long long>(c.small >> 20), c.mb_small, c.cpu_small,
                static_cast<unsigned long long>(c.large >> 20), c.mb_large, c.cpu_large, c.ratio,
                c.cpu_ratio, c.mb_fio, c.cpu_fio, c.reader, c.cpu_reader);
    std::fflush(stdout);
    results.push_back({r.name, x, c});
  }
  if (selected(rows[0].name)) {
    // Sequential QD 1: one read in flight, so a slower request at the
    // device shows in full. Untraced separates the trace's share; one
    // sample a batch, one slot ahead (2 buffers of one read, against fio's
    // one) separates the buffer footprint's.
    const Row& r = rows[0];
    const RowResult x = run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {.traced = false});
    std::printf("%-24s untraced (capture off): %.0f MB/s, %.2f x fio's; %.3f CPU s/GB, "
                "%.2f x fio's\n",
                r.name, x.loader, x.ratio, x.cpu_l, x.cpu_ratio);
    const RowResult y =
        run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {.batch = 1, .prefetch = 1});
    std::printf("%-24s with BATCH_SIZE 1, PREFETCH 1 (%llu MiB of buffers): %.0f MB/s, %.2f x "
                "fio's; %.3f CPU s/GB, %.2f x fio's\n",
                r.name, static_cast<unsigned long long>(2ull * r.bs >> 20), y.loader, y.ratio,
                y.cpu_l, y.cpu_ratio);
  }
  if (selected(rows[4].name)) {
    // Random QD 32: PREFETCH + 1 slots of 32 x 128 KiB (5 x 4 MiB by
    // default) against fio's 4 MiB; one slot ahead shrinks the footprint.
    const Row& q32 = rows[4];
    const RowResult z = run_row(file, size, q32, 2, ramp, chunk, 0, reg, dr, {.prefetch = 1});
    std::printf("%-24s with PREFETCH 1 (2 slots, %llu MiB): %.0f MB/s, %.2f x fio's; %.3f CPU "
                "s/GB, %.2f x fio's\n",
                q32.name,
                static_cast<unsigned long long>(2ull * default_batch(q32) * q32.bs >> 20),
                z.loader, z.ratio, z.cpu_l, z.cpu_ratio);
  }
  if (selected(rows[3].name)) {
    const Row& r = rows[3];
    const RowResult x = run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {.transform = true});
    std::printf(
        "%-24s with a no-op transform (oneTBB pool on, 2 workers): %.0f MB/s, %.3f CPU "
        "s/GB, %.2f x fio's\n",
        r.name, x.loader, x.cpu_l, x.cpu_ratio);
    // The row's batches are 8 x 128 KiB: each costs a thread hand-off (the
    // I/O thread wakes the consumer). 64 samples a batch (8 MiB, still
    // small for a trainer) shows what it costs per GB.
    const RowResult y = run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {.batch = 64});
    std::printf("%-24s with BATCH_SIZE 64 (8 MiB batches): %.0f MB/s, %.2f x fio's; %.3f CPU s/GB, "
                "%.2f x fio's\n",
                r.name, y.loader, y.ratio, y.cpu_l, y.cpu_ratio);
    // The rows above measure the loader as shipped, recording its trace.
    const RowResult z = run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {.traced = false});
    std::printf("%-24s untraced (capture off): %.0f MB/s, %.2f x fio's; %.3f CPU s/GB, "
                "%.2f x fio's\n",
                r.name, z.loader, z.ratio, z.cpu_l, z.cpu_ratio);
  }
  if (selected(rows[5].name)) {
    // The warm row copies from the page cache at memory speed: the loader
    // fills PREFETCH + 1 slots of one batch each in turn (5 x 8 MiB by
    // default), fio refills its QD buffers (8 MiB). One slot ahead, and fio
    // with as many buffers as the loader, show what the footprint costs.
    const Row& r = rows[5];
    const uint32_t batch = default_batch(r);
    const uint32_t same_qd = (sl::Config{}.prefetch_batches + 1) * batch;
    const uint64_t footprint_mib = uint64_t(same_qd) * r.bs >> 20;
    run_cmd({"sh", "-c", "cat '" + file + "' > /dev/null"});
    const RowResult x = run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {.prefetch = 1});
    std::printf("%-24s with PREFETCH 1 (2 slots, %llu MiB): %.0f MB/s, %.2f x fio's; %.3f CPU "
                "s/GB, %.2f x fio's\n",
                r.name, static_cast<unsigned long long>(2ull * batch * r.bs >> 20), x.loader,
                x.ratio, x.cpu_l, x.cpu_ratio);
    const RowResult y = run_row(file, size, r, 2, ramp, chunk, 0, reg, dr, {}, same_qd);
    std::printf("%-24s against fio at QD %u (%llu MiB of buffers, as the loader's): %.0f MB/s, "
                "%.2f x fio's %.0f; %.3f CPU s/GB, %.2f x fio's\n",
                r.name, same_qd, static_cast<unsigned long long>(footprint_mib), y.loader,
                y.ratio, y.fio, y.cpu_l, y.cpu_ratio);
  }
  PagesGain gain;
  if (selected(rows[1].name)) {
    // What the huge pages buy: the loader against itself, HUGE_PAGES on ÷ off.
    const Row& r = rows[1];
    gain = huge_vs_base(file, size, r, rounds, ramp, chunk, reg, dr);
    std::printf("%-24s loader with huge pages %.0f MB/s, with 4 KiB pages %.0f MB/s: %.2f "
                "[%4.2f-%4.2f] (THP: %s)\n",
                r.name, gain.huge, gain.base, gain.ratio, gain.lo, gain.hi,
                thp.empty() ? "not in this kernel" : thp.substr(0, thp.find('\n')).c_str());
  }
  // Net of the footprint: the row's ratio over what the footprint alone
  // costs the bare loop (its MB/s and CPU at the loader's footprint / at
  // fio's): what is left is the loader's own.
  for (const auto& [name, x, c] : results) {
    const double net = c.ratio > 0 ? x.ratio / c.ratio : 0;
    const double cpu_net = c.cpu_ratio > 0 ? x.cpu_ratio / c.cpu_ratio : 0;
    const double no_recorder_cpu = x.cpu_f > 0 ? (x.cpu_l - x.recorder_l) / x.cpu_f : 0;
    std::printf("# %s: ratio %.2f, CPU %.2f; the footprint alone %.2f, CPU %.2f; net of it %.2f, "
                "CPU %.2f; CPU without the recorder's threads %.2f; the bare loop at fio's "
                "footprint %.2f x fio's MB/s, %.2f x CPU\n",
                name, x.ratio, x.cpu_ratio, c.ratio, c.cpu_ratio, net, cpu_net, no_recorder_cpu,
                c.reader, c.cpu_reader);
  }
  for (const auto& [name, x, c] : results) {
    const bool direct = std::string(name).find("_direct_") != std::string::npos;
    const bool valid = x.valid && (g_buffers.like_for_like() || !direct);
    if (!x.valid)
      std::printf("# %s: compared fio %.0f MB/s < 80 %% of the references %.0f (before) and %.0f "
                  "(after) MB/s, twice: INVALID\n",
                  name, x.fio, x.ref, x.ref_after);
    else if (x.ref_after > 0)
      std::printf("# %s: valid against the reference after the row (%.0f MB/s; %.0f before): "
                  "the device slowed during it\n",
                  name, x.ref_after, x.ref);
    else if (!valid)
      std::printf("# %s: fio's buffers are not on the loader's page size: INVALID\n", name);
    result(std::string("loader_vs_fio_") + name, x.ratio, ">=", 0.95, valid);
    result(std::string("loader_vs_fio_cpu_") + name, x.cpu_ratio, "<=", 1.0, valid);
  }
  for (const auto& [name, x, c] : results) {
    const bool valid = x.valid && c.ratio > 0 && c.cpu_ratio > 0 &&
                       (g_buffers.like_for_like() ||
                        std::string(name).find("_direct_") == std::string::npos);
    result(std::string("loader_vs_fio_net_") + name, c.ratio > 0 ? x.ratio / c.ratio : 0, ">=",
           0.95, valid);
    result(std::string("loader_vs_fio_cpu_net_") + name,
           c.cpu_ratio > 0 ? x.cpu_ratio / c.cpu_ratio : 0, "<=", 1.0, valid);
  }
  if (selected(rows[1].name))
    result(std::string("loader_huge_vs_4k_pages_") + rows[1].name, gain.ratio, ">=", 0.95,
           gain.ratio > 0);
  for (const Row& r : {rows[1], rows[4]}) {
    if (!selected(r.name)) continue;
    std::vector<double> u_p99, u_cpu, p_p99, p_cpu;  // alternating rounds, medians
    for (int i = 0; i < std::max(1, rounds / 2); ++i) {
      sl::drop_cache(file);
      const auto u = reader_p99(sl::Backend::kUring, file, q, r);
      sl::drop_cache(file);
      const auto p = reader_p99(sl::Backend::kPread, file, q, r);
      u_p99.push_back(u.first), u_cpu.push_back(u.second);
      p_p99.push_back(p.first), p_cpu.push_back(p.second);
    }
    std::printf("%-24s uring p99 %.0f us, %.3f CPU s/GB; pread(8) p99 %.0f us, %.3f CPU s/GB\n",
                r.name, median(u_p99), median(u_cpu), median(p_p99), median(p_cpu));
    result(std::string("uring_vs_pread_p99_") + r.name, median(u_p99) / median(p_p99), "<=", 1.0,
           true);
    result(std::string("uring_vs_pread_cpu_") + r.name, median(u_cpu) / median(p_cpu), "<=", 1.0,
           true);
  }
  std::printf("loadavg at end: %s\n", loadavg().c_str());
  std::filesystem::remove_all(std::filesystem::path(file).parent_path());
  return 0;
}
