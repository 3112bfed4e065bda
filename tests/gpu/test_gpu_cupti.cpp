// CUPTI on a real device (label gpu; exits 77 where no driver or device):
// pageable and pinned copies with their memory kinds, a memset, a kernel
// after its launch call, a device synchronize, all stamped with
// CLOCK_MONOTONIC; the device they ran on attached once as "cuda.device";
// then a hand-over stops recording and is marked.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "trainer/ptx_spin.hpp"  // samples/trainer
#include "libtrace/probe_runner.hpp"
#include "stallscope/reader.hpp"
#include "stallscope/trace.h"

namespace rd = stallscope::reader;
namespace fmt = stallscope::format;

namespace {

const std::string kLib = std::string(STALLSCOPE_TEST_BINARY_DIR) + "/lib/libstallscope_cuda.so";
stallscope::test::TempDir g_out;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

template <typename F>
F sym(void* lib, const char* name) {
  auto f = reinterpret_cast<F>(dlsym(lib, name));
  BOOST_TEST_REQUIRE(f != nullptr, name);
  return f;
}

constexpr size_t kBytes = 64u << 20;

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_cupti)

BOOST_AUTO_TEST_CASE(copies_kernels_and_syncs_arrive_in_order_on_the_monotonic_clock) {
  void* lib = dlopen(kLib.c_str(), RTLD_NOW | RTLD_LOCAL);
  BOOST_TEST_REQUIRE(lib != nullptr, dlerror());
  BOOST_TEST_REQUIRE(sym<int (*)()>(lib, "stallscope_cuda_attach_v1")() == 0);
  const int64_t t0 = now_ns();
  void *dev = nullptr, *pinned = nullptr;
  std::vector<char> pageable(kBytes, 1);
  BOOST_TEST_REQUIRE(cudaMalloc(&dev, kBytes) == cudaSuccess);
  BOOST_TEST_REQUIRE(cudaMallocHost(&pinned, kBytes) == cudaSuccess);
  cudaKernel_t spin = stallscope::test::load_spin_kernel();
  BOOST_TEST_REQUIRE(spin != nullptr);
  cudaMemcpy(dev, pageable.data(), kBytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dev, pinned, kBytes, cudaMemcpyHostToDevice);
  cudaMemset(dev, 0, kBytes);
  stallscope_step_begin(41);  // the launch carries external id 42
  BOOST_TEST(stallscope::test::launch_spin(spin, 2'000'000, stallscope::test::sm_clock_khz(0),
                                           nullptr) == cudaSuccess);
  stallscope_step_end(41);
  cudaDeviceSynchronize();
  cudaMemcpy(pageable.data(), dev, kBytes, cudaMemcpyDeviceToHost);
  BOOST_TEST(sym<int (*)()>(lib, "stallscope_cuda_flush_v1")() == 0);
  const int64_t t1 = now_ns();
  // Hand CUPTI over: later work is no longer recorded, the hand-over is.
  BOOST_TEST(sym<int (*)(const char*, const char*)>(lib, "stallscope_cuda_cupti_request_v1")(
                 "cuptiSubscribe", "test_gpu_cupti") == 1);
  stallscope::test::launch_spin(spin, 1'000'000, stallscope::test::sm_clock_khz(0), nullptr);
  cudaDeviceSynchronize();
  cudaFree(dev);
  cudaFreeHost(pinned);
  stallscope_shutdown();

  std::string err;
  const auto files = rd::list_trace_files(g_out / "run", &err);
  BOOST_TEST_REQUIRE(files.size() == 1u, err);
  rd::TraceReader r(files[0]);
  rd::Event e;
  int h2d_pageable = 0, h2d_pinned = 0, d2h = 0, memsets = 0, kernels = 0, syncs = 0, marks = 0;
  int64_t kernel_ts = 0;
  uint64_t kernel_corr = 0;
  std::vector<std::pair<uint64_t, int64_t>> launches;  // corr, ts of cudaLaunchKernel calls
  std::vector<std::pair<uint64_t, uint64_t>> external;  // corr, external id
  while (r.next(e)) {
    const bool gpu = (e.flags & fmt::kTimesNs) != 0 && e.phase == fmt::kComplete;
    if (gpu) {
      BOOST_TEST(e.ts_ns >= t0);
      BOOST_TEST(e.end_ns() <= t1);
    }
    switch (e.kind_enum()) {
      case fmt::Kind::kH2D:
        BOOST_TEST(e.copy.bytes == kBytes);
        h2d_pageable += e.copy.src == static_cast<uint8_t>(fmt::MemKind::kPageable);
        h2d_pinned += e.copy.src == static_cast<uint8_t>(fmt::MemKind::kPinned);
        break;
      case fmt::Kind::kD2H:
        ++d2h;
        break;
      case fmt::Kind::kMemset:
        ++memsets;
        break;
      case fmt::Kind::kKernel:
        if (r.string(e.name_id) == "stallscope_spin")
          ++kernels, kernel_ts = e.ts_ns, kernel_corr = e.corr;
        BOOST_TEST(e.dur_ns >= 1'000'000);
        break;
      case fmt::Kind::kSync:
        ++syncs;
        break;
      case fmt::Kind::kApiCall:
        if (r.string(e.name_id).find("LaunchKernel") != std::string_view::npos)
          launches.emplace_back(e.corr, e.ts_ns);
        if (r.string(e.name_id) == "cupti.external_correlation")
          external.emplace_back(e.corr, e.value);
        break;
      case fmt::Kind::kMark:
        marks += r.string(e.name_id) == "GPU activity handed to test_gpu_cupti (cuptiSubscribe)";
        break;
      default:
        break;
    }
  }
  BOOST_TEST(h2d_pageable == 1);
  BOOST_TEST(h2d_pinned == 1);
  BOOST_TEST(d2h == 1);
  BOOST_TEST(memsets == 1);
  BOOST_TEST(kernels == 1);  // the one after the hand-over is not recorded
  BOOST_TEST(syncs >= 1);
  BOOST_TEST(marks == 1);
  bool launched_before = false;
  for (auto [corr, ts] : launches) launched_before |= corr == kernel_corr && ts <= kernel_ts;
  BOOST_TEST(launched_before, "no launch call with the kernel's correlation id before it");
  // The step's launch is tied to the step: external id 41 + 1 on its corr.
  bool tagged = false;
  for (auto [corr, id] : external) tagged |= corr == kernel_corr && id == 42;
  BOOST_TEST(tagged, "no external correlation 42 on the kernel's launch (" << external.size()
                                                                           << " records)");

  // Device 0 ran the work. Its uuid is empty when CUPTI sent no device
  // record: main() initialized CUDA before stallscope enabled the kind.
  std::vector<nlohmann::json> devices;
  for (const auto& a : r.attachments())
    if (a.name == "cuda.device") devices.push_back(nlohmann::json::parse(a.data));
  BOOST_TEST_REQUIRE(devices.size() == 1u);
  BOOST_TEST_MESSAGE("cuda.device: " << devices[0].dump());
  BOOST_TEST(devices[0].at("id").get<int>() == 0);
  const std::string uuid = devices[0].at("uuid");
  if (!uuid.empty()) {  // a device record came: NVML's form, and a name
    BOOST_TEST(uuid.size() == 40u, uuid);
    BOOST_TEST(uuid.rfind("GPU-", 0) == 0u, uuid);
    BOOST_TEST(!devices[0].at("name").get<std::string>().empty());
  }
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIP: no CUDA driver or device (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return 77;
  }
  setenv("STALLSCOPE_OUT", (g_out / "run").c_str(), 1);
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
