// PyTorch profiler import speed and memory: generates a large
// current-schema Kineto trace (default 300 MB of JSON), then measures on
// one core, in CPU time (getrusage), the import as `stallscope report` runs
// it (kineto::import_file: the file streamed through the parser's window)
// with its peak RSS, reading the bytes into memory (the reference), parsing
// and mapping them from memory (simdjson), and analyzing the imported rank.
//
//   kineto_import [--mb 300] [--file PATH] [--keep]
//
// MB/s are 10^6 bytes of JSON per CPU second; the peak RSS of the import is
// its growth over the RSS before it (/proc/self/clear_refs resets the peak),
// as a ratio to the JSON's size. Ends with RESULT lines; the targets are
// parse + analyze >= 200 MB/s and an import's peak RSS <= 1.5 x the JSON
// (RELIABILITY.md case 46). Then bench/kineto_import_hta.py
// runs Holistic Trace Analysis on the same file where it is installed
// (STALLSCOPE_HTA_PYTHON: the Python to use; default python3).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "kineto/kineto.hpp"

namespace kin = stallscope::analyzer::kineto;

namespace {

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Appends printf-formatted text.
void add(std::string& out, const char* f, auto... a) {
  char buf[2048];
  const int n = std::snprintf(buf, sizeof buf, f, a...);
  out.append(buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
}

// Time in µs with three decimals, as Kineto writes it.
struct Us {
  int64_t ns;
};
#define US(x) (long long)((x).ns / 1000), (int)((x).ns % 1000)

// One operator: cpu_op, two Python frames, its launch, its kernel and the flow.
void op(std::string& o, int64_t t, int64_t corr, int64_t step_corr) {
  const Us a{t}, l{t + 8'000}, k{t + 12'000};
  add(o, R"J(
  {
    "ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1501): _call_impl", "pid": 4242, "tid": 4242,
    "ts": %lld.%03d, "dur": 60.000,
    "args": {
      "Python parent id": %lld, "Python id": %lld, "Python thread": 0
    }
  },)J",
      US(a), (long long)step_corr, (long long)corr);
  add(o, R"J(
  {
    "ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 4242, "tid": 4242,
    "ts": %lld.%03d, "dur": 40.250,
    "args": {
      "External id": %lld,"Record function id": 0, "Concrete Inputs": ["", "", "", "1", "1"], "Input type": ["float", "float", "float", "Scalar", "Scalar"], "Input Strides": [[1], [512, 1], [1, 512], [], []], "Input Dims": [[512], [64, 512], [512, 512], [], []], "Ev Idx": %lld
    }
  },)J",
      US(a), (long long)corr, (long long)corr);
  add(o, R"J(
  {
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
    "ts": %lld.%03d, "dur": 4.125,
    "args": {
      "External id": %lld,
      "cbid": 211, "correlation": %lld
    }
  },
  {
    "ph": "s", "id": %lld, "pid": 4242, "tid": 4242, "ts": %lld.%03d,
    "cat": "ac2g", "name": "ac2g"
  },)J",
      US(l), (long long)corr, (long long)corr, (long long)corr, US(l));
  add(o, R"J(
  {
    "ph": "X", "cat": "kernel", "name": "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4::Params)", "pid": 0, "tid": 7,
    "ts": %lld.%03d, "dur": 61.344,
    "args": {
      "External id": %lld,
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": %lld,
      "registers per thread": 232,
      "shared memory": 73728,
      "blocks per SM": 0.484848,
      "warps per SM": 3.878788,
      "grid": [8, 8, 1],
      "block": [256, 1, 1],
      "est. achieved occupancy %%": 6
    }
  },
  {
    "ph": "f", "id": %lld, "pid": 0, "tid": 7, "ts": %lld.%03d,
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  },)J",
      US(k), (long long)corr, (long long)corr, (long long)corr, US(k));
}

// One step: 10 ms, a DataLoader wait, 100 operators, a copy, an allreduce, a sync.
void step(std::string& o, int n, int64_t t0, int64_t& corr) {
  const Us s{t0}, dl{t0 + 10'000}, cp{t0 + 1'100'000}, nc{t0 + 9'000'000}, sy{t0 + 9'400'000};
  add(o, R"J(
  {
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 4242, "tid": 4242,
    "ts": %lld.%03d, "dur": 10000.000,
    "args": {
      "External id": %lld
    }
  },
  {
    "ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#%d", "pid": 0, "tid": 7,
    "ts": %lld.%03d, "dur": 9800.000,
    "args": {
      "External id": %lld
    }
  },
  {
    "ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "pid": 4242, "tid": 4242,
    "ts": %lld.%03d, "dur": 1000.000,
    "args": {
      "External id": %lld
    }
  },
  {
    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
    "ts": %lld.%03d, "dur": 150.500,
    "args": {
      "External id": %lld,
      "device": 0, "context": 1,
      "stream": 7, "correlation": %lld,
      "bytes": 1048576, "memory bandwidth (GB/s)": 6.967
    }
  },)J",
      n, US(s), (long long)corr, n, US(s), (long long)corr, US(dl), (long long)corr + 1, US(cp),
      (long long)corr + 2, (long long)corr + 2);
  corr += 3;
  for (int i = 0; i < 100; ++i, ++corr) op(o, t0 + 1'300'000 + i * 76'000, corr, corr);
  add(o, R"J(
  {
    "ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20,
    "ts": %lld.%03d, "dur": 300.000,
    "args": {
      "External id": %lld,
      "queued": 0, "device": 0, "context": 1,
      "stream": 20, "correlation": %lld,
      "registers per thread": 96, "shared memory": 0,
      "grid": [2, 1, 1], "block": [640, 1, 1],
      "Collective name": "allreduce", "In msg nelems": 2097152, "Out msg nelems": 2097152, "Group size": 8, "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg"
    }
  },
  {
    "ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 4242, "tid": 4242,
    "ts": %lld.%03d, "dur": 500.000,
    "args": {
      "cbid": 131, "correlation": %lld
    }
  },
  {
    "ph": "X", "cat": "cuda_sync", "name": "Stream Synchronize", "pid": 0, "tid": 7,
    "ts": %lld.%03d, "dur": 480.000,
    "args": {
      "cuda_sync_kind": "Stream Synchronize",
      "stream": 7, "correlation": %lld,
      "device": 0, "context": 1
    }
  },)J",
      US(nc), (long long)corr, (long long)corr, US(sy), (long long)corr + 1, US(sy),
      (long long)corr + 1);
  corr += 2;
}

uint64_t generate(const std::string& path, uint64_t target) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::string o = R"J({
  "schemaVersion": 1,
  "deviceProperties": [
    {
      "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85031714816,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132
    }
  ],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8, "pg_count": 1},
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [)J";
  uint64_t bytes = 0;
  int64_t corr = 1;
  for (int n = 1; bytes + o.size() < target; ++n) {
    step(o, n, int64_t(n) * 10'000'000, corr);
    if (o.size() > (8u << 20)) {
      bytes += std::fwrite(o.data(), 1, o.size(), f);
      o.clear();
    }
  }
  add(o, R"J(
  {
    "name": "Record Window End", "ph": "i", "s": "g",
    "pid": "", "tid": "", "ts": %lld.000
  }
  ],
  "traceName": "bench.json"
})J",
      (long long)(corr * 100));
  bytes += std::fwrite(o.data(), 1, o.size(), f);
  std::fclose(f);
  return bytes;
}

const char* verdict(bool ok) { return ok ? "PASS" : "MISS"; }

long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  const std::string key = std::string(field) + ":";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + key.size());
  return -1;
}

// Resets the peak RSS to the current RSS; false where the kernel refuses.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 300;
  std::string file =
      (std::filesystem::temp_directory_path() / "stallscope-kineto-bench.json").string();
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mb") && i + 1 < argc)
      mb = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--file") && i + 1 < argc)
      file = argv[++i];
    else if (!std::strcmp(argv[i], "--keep"))
      keep = true;
    else {
      std::fprintf(stderr, "usage: kineto_import [--mb N] [--file PATH] [--keep]\n");
      return 2;
    }
  }
  const uint64_t bytes = generate(file, static_cast<uint64_t>(mb * 1e6));
  std::printf("trace: %s, %.1f MB of JSON\n", file.c_str(), double(bytes) / 1e6);

  // The import as the command line runs it: streamed from the file.
  const bool peak_ok = reset_peak_rss();
  const long rss0 = status_kb("VmRSS");
  double c0 = cpu_s(), w0 = wall_s();
  uint64_t file_kept = 0;
  {
    const kin::ImportedRank streamed = kin::import_file(file);
    file_kept = streamed.stats.kept;
  }
  const double file_cpu = cpu_s() - c0, file_wall = wall_s() - w0;
  const double peak_mb = double(status_kb("VmHWM") - rss0) * 1024 / 1e6;
  std::printf("import_file: %.3f s CPU (%.0f MB/s), %llu events kept, peak RSS +%.1f MB%s\n",
              file_cpu, double(bytes) / 1e6 / file_cpu, (unsigned long long)file_kept, peak_mb,
              peak_ok ? "" : " (peak not reset: /proc/self/clear_refs refused)");
  std::fflush(stdout);

  // Reference: the bytes into memory (page cache warm from generating).
  c0 = cpu_s();
  w0 = wall_s();
  std::string json = kin::read_json(file);
  const double read_cpu = cpu_s() - c0, read_wall = wall_s() - w0;

  c0 = cpu_s();
  w0 = wall_s();
  const kin::ImportedRank imp = kin::import_json(json, file);
  const double parse_cpu = cpu_s() - c0, parse_wall = wall_s() - w0;
  std::printf("parsed: %.3f s CPU (%.0f MB/s)\n", parse_cpu, double(bytes) / 1e6 / parse_cpu);
  std::fflush(stdout);
  c0 = cpu_s();
  w0 = wall_s();
  const auto rep = stallscope::analyzer::analyze_imported(imp, {});
  const double analyze_cpu = cpu_s() - c0, analyze_wall = wall_s() - w0;

  const double mbytes = double(bytes) / 1e6;
  const double read_mbps = mbytes / read_cpu, parse_mbps = mbytes / parse_cpu;
  const double pa_mbps = mbytes / (parse_cpu + analyze_cpu);
  const double all_mbps = mbytes / (read_cpu + parse_cpu + analyze_cpu);
  std::printf("events %llu, kept %llu, steps %zu (steady %zu), cause: %s\n",
              (unsigned long long)imp.stats.events, (unsigned long long)imp.stats.kept,
              rep.steps.size(), rep.steady_steps, rep.cause.c_str());
  std::printf("%-22s %10s %10s %10s\n", "phase", "cpu s", "wall s", "MB/s(cpu)");
  std::printf("%-22s %10.3f %10.3f %10.0f\n", "import_file (stream)", file_cpu, file_wall,
              mbytes / file_cpu);
  std::printf("%-22s %10.3f %10.3f %10.0f\n", "read (reference)", read_cpu, read_wall, read_mbps);
  std::printf("%-22s %10.3f %10.3f %10.0f\n", "parse + map (memory)", parse_cpu, parse_wall,
              parse_mbps);
  std::printf("%-22s %10.3f %10.3f %10.0f\n", "analyze", analyze_cpu, analyze_wall,
              mbytes / analyze_cpu);
  std::printf("%-22s %10.3f %10.3f %10.0f\n", "parse + analyze", parse_cpu + analyze_cpu,
              parse_wall + analyze_wall, pa_mbps);
  std::printf("temporal breakdown (steady steps): ");
  for (size_t p = 0; p < stallscope::analyzer::kPartCount; ++p)
    if (rep.parts[p].share > 0.001)
      std::printf(
          "%s %.1f %%  ",
          std::string(stallscope::analyzer::part_key(stallscope::analyzer::Part(p))).c_str(),
          100 * rep.parts[p].share);
  std::printf("\n");
  std::printf("RESULT kineto_read_mbps %.0f MB/s target >= 0 PASS\n", read_mbps);
  std::printf("RESULT kineto_import_file_mbps %.0f MB/s target >= 0 PASS\n", mbytes / file_cpu);
  std::printf("RESULT kineto_import_peak_rss_ratio %.3f x JSON target <= 1.5 %s\n",
              peak_mb / mbytes, verdict(peak_ok && peak_mb / mbytes <= 1.5));
  std::printf("RESULT kineto_parse_analyze_mbps %.0f MB/s target >= 200 %s\n", pa_mbps,
              verdict(pa_mbps >= 200));
  std::printf("RESULT kineto_end_to_end_mbps %.0f MB/s target >= 0 PASS\n", all_mbps);
  std::printf("RESULT kineto_parse_analyze_vs_read %.3f ratio target >= 0 PASS\n",
              read_mbps > 0 ? pa_mbps / read_mbps : 0);
  std::fflush(stdout);
  // Holistic Trace Analysis on the same file, where its Python package is
  // installed (STALLSCOPE_HTA_PYTHON names the interpreter, e.g. a venv's).
  const char* py = std::getenv("STALLSCOPE_HTA_PYTHON");
  const std::string cmd =
      std::string(py != nullptr ? py : "python3") + " " STALLSCOPE_HTA_SCRIPT " '" + file + "'";
  if (std::system(cmd.c_str()) != 0) std::printf("HTA comparison could not run: %s\n", cmd.c_str());
  if (!keep) std::filesystem::remove(file);
  return 0;
}
