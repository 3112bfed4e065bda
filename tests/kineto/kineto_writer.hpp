// Test helper: writes small PyTorch profiler traces in the current Kineto
// schema (object with schemaVersion, lowercase categories, int pid/tid,
// baseTimeNanoseconds, ac2g flows) or the older one (a bare array, Operator /
// Runtime / Kernel / Memcpy, tid "stream 7", "external id", async/launch
// flows). Times are given in ms from the trace's time 0.
//
//   KinetoWriter w(KinetoWriter::kCurrent);
//   w.step(1, 0, 100).dataloader(0, 60).kernel(65, 95);
//   write_file(dir / "t.json", w.json());
#pragma once

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace stallscope::testing {

class KinetoWriter {
 public:
  enum Schema { kCurrent, kLegacy };
  explicit KinetoWriter(Schema s) : s_(s) {
    // Noise every real trace holds: metadata, a Python frame, an operator.
    events_.push_back(
        R"({"name": "process_name", "ph": "M", "ts": 0.000, "pid": 4242, "tid": 0, "args": {"name": "python"}})");
  }
  int64_t base_ns = 0;  // baseTimeNanoseconds (current schema; 0 = not written)
  int rank = -1;        // distributedInfo.rank (current schema; -1 = not written)
  int world = 0;

  KinetoWriter& step(int n, double a, double b) {
    host(cat("user_annotation", "Operator"), "ProfilerStep#" + std::to_string(n), a, b);
    // Kineto copies annotations onto the streams they launched work on: to be ignored.
    if (s_ == kCurrent) dev("gpu_user_annotation", "ProfilerStep#" + std::to_string(n), a, b, "");
    return *this;
  }
  KinetoWriter& dataloader(double a, double b, bool workers = true) {
    host(cat("user_annotation", "Operator"),
         workers ? "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
                 : "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
         a, b);
    return *this;
  }
  KinetoWriter& op(const std::string& name, double a, double b) {
    host(cat("cpu_op", "Operator"), name, a, b);
    return *this;
  }
  KinetoWriter& python(const std::string& name, double a, double b) {
    if (s_ == kCurrent) host("python_function", name, a, b);
    return *this;
  }
  KinetoWriter& kernel(double a, double b,
                       const std::string& name = "void at::native::gemm_kernel<float>(float*)") {
    dev(cat("kernel", "Kernel"), name, a, b, corr_args(++corr_));
    flow(a);
    return *this;
  }
  // An all-reduce; or `collective` ("reduce_scatter": In msg nelems is every
  // rank's part, Out the rank's own, as PyTorch records them).
  KinetoWriter& nccl(double a, double b, long nelems, const std::string& dtype, int group,
                     const std::string& collective = "allreduce") {
    const bool rs = collective == "reduce_scatter";
    std::string args =
        corr_args(++corr_) +
        ", \"Collective name\": \"" + collective + "\", \"In msg nelems\": " +
        std::to_string(rs ? nelems * group : nelems) +
        ", \"Out msg nelems\": " + std::to_string(nelems) +
        ", \"Group size\": " + std::to_string(group) + ", \"dtype\": \"" + dtype +
        "\", \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\"";
    dev(cat("kernel", "Kernel"),
        rs ? "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
           : "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        a, b, args);
    return *this;
  }
  KinetoWriter& memcpy(double a, double b, const std::string& name, long bytes) {
    dev(cat("gpu_memcpy", "Memcpy"), name, a, b,
        corr_args(++corr_) + ", \"bytes\": " + std::to_string(bytes));
    return *this;
  }
  KinetoWriter& runtime(double a, double b, const std::string& name) {
    const std::string ext = s_ == kCurrent ? "\"External id\"" : "\"external id\"";
    host(cat("cuda_runtime", "Runtime"), name, a, b,
         "\"cbid\": 211, \"correlation\": " + std::to_string(corr_ + 1) + ", " + ext + ": 7");
    return *this;
  }
  // A record_function range ("Optimizer.step#AdamW.step", "eval").
  KinetoWriter& annotation(const std::string& name, double a, double b) {
    host(cat("user_annotation", "Operator"), name, a, b);
    return *this;
  }
  // The stream of the device events that follow (default 7).
  KinetoWriter& on_stream(int s) {
    stream_ = s;
    return *this;
  }
  // A raw event line (malformed-input tests).
  KinetoWriter& raw(const std::string& event) {
    events_.push_back(event);
    return *this;
  }

  std::string json() const {
    std::string body;
    for (size_t i = 0; i < events_.size(); ++i) body += (i ? ",\n  " : "  ") + events_[i];
    if (s_ == kLegacy) return "[\n" + body + "\n]\n";
    std::string head =
        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA "
        "H100\", "
        "\"totalGlobalMem\": 85000000000, \"computeMajor\": 9, \"numSms\": 132}],\n";
    if (rank >= 0)
      head += "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank) +
              ", \"world_size\": " + std::to_string(world) + "},\n";
    head += "  \"displayTimeUnit\": \"ms\",\n";
    if (base_ns != 0) head += "  \"baseTimeNanoseconds\": " + std::to_string(base_ns) + ",\n";
    return head + "  \"traceEvents\": [\n" + body + "\n  ],\n  \"traceName\": \"t.json\"\n}\n";
  }

 private:
  std::string cat(const char* current, const char* legacy) const {
    return s_ == kCurrent ? current : legacy;
  }
  static std::string us(double ms) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", ms * 1000.0);
    return buf;
  }
  std::string corr_args(int c) const {
    const std::string ext = s_ == kCurrent ? "\"External id\"" : "\"external id\"";
    return "\"device\": 0, \"stream\": " + std::to_string(stream_) +
           ", \"correlation\": " + std::to_string(c) + ", " + ext + ": 7";
  }
  void host(const std::string& c, const std::string& name, double a, double b,
            const std::string& args = "") {
    const std::string tid = s_ == kCurrent ? "4242" : "\"4242\"";
    events_.push_back("{\"ph\": \"X\", \"cat\": \"" + c + "\", \"name\": \"" + name +
                      "\", \"pid\": 4242, \"tid\": " + tid + ", \"ts\": " + us(a) +
                      ", \"dur\": " + us(b - a) + ", \"args\": {" + args + "}}");
  }
  void dev(const std::string& c, const std::string& name, double a, double b,
           const std::string& args) {
    const std::string st = std::to_string(stream_);
    const std::string tid = s_ == kCurrent ? st : "\"stream " + st + "\"";
    events_.push_back("{\"ph\": \"X\", \"cat\": \"" + c + "\", \"name\": \"" + name +
                      "\", \"pid\": 0, \"tid\": " + tid + ", \"ts\": " + us(a) +
                      ", \"dur\": " + us(b - a) + ", \"args\": {" + args + "}}");
  }
  void flow(double a) {
    const std::string c = s_ == kCurrent ? "ac2g" : "async", n = s_ == kCurrent ? "ac2g" : "launch";
    const std::string tid = s_ == kCurrent ? "7" : "\"stream 7\"";
    events_.push_back("{\"ph\": \"f\", \"id\": " + std::to_string(corr_) +
                      ", \"pid\": 0, \"tid\": " + tid + ", \"ts\": " + us(a) + ", \"cat\": \"" + c +
                      "\", \"name\": \"" + n + "\", \"bp\": \"e\"}");
  }

  Schema s_;
  int corr_ = 0;
  int stream_ = 7;
  std::vector<std::string> events_;
};

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

inline void write_gzip(const std::filesystem::path& p, const std::string& text) {
  gzFile g = gzopen(p.c_str(), "wb");
  gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
  gzclose(g);
}

// A fresh directory under the build tree for one test.
inline std::filesystem::path test_dir(const std::string& name) {
  const auto d = std::filesystem::path(STALLSCOPE_TEST_BINARY_DIR) / "kineto-tests" / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace stallscope::testing
