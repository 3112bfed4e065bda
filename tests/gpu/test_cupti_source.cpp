// The CUPTI source's life cycle against a fake CUPTI (fake_cupti.cpp), with
// the shim's CUPTI interposition (integrations/preload/src/
// cupti_interpose.cpp) linked ahead of it as the preload shim would be:
// subscription as "stallscope", the timestamp callback registered before
// any kind and answering CLOCK_MONOTONIC, records converted, zero-time and
// unknown records counted, drops recorded, capture off/on, each device
// that ran work attached once as "cuda.device", and the hand-over when
// another library subscribes.
#include <cupti.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <map>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "libtrace/probe_runner.hpp"
#include "stallscope/reader.hpp"
#include "stallscope/trace.h"

extern "C" {
const char* fake_cupti_subscriber();
int fake_cupti_subscribers();
int fake_cupti_unsubscribes();
const char* fake_cupti_order();
int fake_cupti_enabled(int kind);
int fake_cupti_emit(int kernels, size_t dropped);
int fake_cupti_emit_device(uint32_t id, const unsigned char* uuid, const char* name, int mig);
int fake_cupti_emit_work(int kind, uint32_t device);
const char* fake_cupti_external();
int fake_cupti_default_flushes();
int fake_cupti_stage(int kernels);
int fake_cupti_staged_completed_by();
}

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

constexpr unsigned char kUuid0[16] = {0x3f, 0xa2, 0x9c, 0x01, 0x8e, 0x4b, 0x7d, 0x10,
                                      0xc5, 0x6e, 0xf0, 0x0d, 0xba, 0x11, 0x22, 0x99};
constexpr unsigned char kUuid1[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
constexpr unsigned char kUuid3[16] = {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03};

template <typename F>
F sym(void* lib, const char* name) {
  auto f = reinterpret_cast<F>(dlsym(lib, name));
  BOOST_TEST_REQUIRE(f != nullptr, name);
  return f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cupti_source)

// In a child (the library attaches once per process): with keep, another
// library's subscription is refused as CUPTI refuses a second subscriber.
BOOST_AUTO_TEST_CASE(keep_refuses_another_subscriber_while_recording) {
  const pid_t pid = fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("STALLSCOPE_OUT", (g_out / "keep").c_str(), 1);
    setenv("STALLSCOPE_CUPTI", "keep", 1);
    setenv("STALLSCOPE_CUPTI_LIB", STALLSCOPE_FAKE_CUPTI, 1);
    setenv("STALLSCOPE_CUDA_DRIVER_LIB", STALLSCOPE_FAKE_CUPTI, 1);
    void* lib = dlopen(kLib.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto attach =
        lib ? reinterpret_cast<int (*)()>(dlsym(lib, "stallscope_cuda_attach_v1")) : nullptr;
    if (attach == nullptr || attach() != 0) _exit(10);
    CUpti_SubscriberHandle other = nullptr;
    const CUptiResult rc = cuptiSubscribe(&other, nullptr, nullptr);
    _exit(rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && fake_cupti_unsubscribes() == 0
              ? 0
              : 11);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
}

BOOST_AUTO_TEST_CASE(records_through_cupti_then_hands_it_over) {
  setenv("STALLSCOPE_OUT", (g_out / "run").c_str(), 1);
  setenv("STALLSCOPE_CUPTI_LIB", STALLSCOPE_FAKE_CUPTI, 1);
  setenv("STALLSCOPE_CUDA_DRIVER_LIB", STALLSCOPE_FAKE_CUPTI, 1);  // "a driver is present"
  stallscope_init();
  void* lib = dlopen(kLib.c_str(), RTLD_NOW | RTLD_LOCAL);
  BOOST_TEST_REQUIRE(lib != nullptr, dlerror());
  BOOST_TEST_REQUIRE(sym<int (*)()>(lib, "stallscope_cuda_attach_v1")() == 0);

  BOOST_TEST(std::string(fake_cupti_subscriber()) == "stallscope");
  const std::string order = fake_cupti_order();
  BOOST_TEST(order.rfind("TE", 0) == 0u, "timestamp callback after a kind: " + order);
  for (int k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION})
    BOOST_TEST(fake_cupti_enabled(k) == 1, "kind " << k);
  BOOST_TEST(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_DEVICE) == 1);

  const int64_t t0 = now_ns();
  BOOST_TEST(fake_cupti_emit(3, 5) == 0);
  const int64_t t1 = now_ns();

  // Devices: 0 named, then runs kernels; 1 named, runs nothing; 3 runs a
  // copy, named later (while capture is off); 2 runs a memset, never named.
  BOOST_TEST(fake_cupti_emit_device(0, kUuid0, "NVIDIA H200", 0) == 0);
  BOOST_TEST(fake_cupti_emit_work(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0) == 0);
  BOOST_TEST(fake_cupti_emit_work(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0) == 0);
  BOOST_TEST(fake_cupti_emit_device(1, kUuid1, "NVIDIA H200", 0) == 0);
  BOOST_TEST(fake_cupti_emit_work(CUPTI_ACTIVITY_KIND_MEMCPY, 3) == 0);
  BOOST_TEST(fake_cupti_emit_work(CUPTI_ACTIVITY_KIND_MEMSET, 2) == 0);

  auto capture = sym<void (*)(int)>(lib, "stallscope_cuda_capture_v1");
  capture(0);
  BOOST_TEST(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 0);
  BOOST_TEST(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_DEVICE) == 1);  // never off with capture
  BOOST_TEST(std::string(fake_cupti_order()).back() == 'F');        // flushed after disabling
  BOOST_TEST(fake_cupti_emit_device(3, kUuid3, "NVIDIA \"H200\" MIG\n", 1) == 0);
  capture(1);
  BOOST_TEST(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 1);
  BOOST_TEST(sym<int (*)()>(lib, "stallscope_cuda_flush_v1")() == 0);

  // Step markers tag the step's CUDA calls (external id = index + 1); a
  // begin without its end pops the stale id first.
  stallscope_step_begin(4);
  stallscope_step_end(4);
  stallscope_step_begin(7);
  stallscope_step_begin(8);
  stallscope_step_end(8);
  stallscope_step_begin(9);  // still pushed at the hand-over below
  BOOST_TEST(std::string(fake_cupti_external()) == "+5-5+8-8+9-9+10");

  // Completed buffers are delivered by a background thread (CUPTI's
  // default flush), woken by step ends and at least every second, and
  // converted there: 4 kernels staged now come back on that thread, not on
  // this one, and are in the trace below.
  const int64_t staged_t0 = now_ns();
  BOOST_TEST_REQUIRE(fake_cupti_stage(4) == 0);
  const int64_t staged_t1 = now_ns();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (fake_cupti_staged_completed_by() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST(fake_cupti_default_flushes() > 0);
  BOOST_TEST(fake_cupti_staged_completed_by() != 0);
  BOOST_TEST(fake_cupti_staged_completed_by() != static_cast<int>(::gettid()));

  // A forked child (a DataLoader worker) never touches CUPTI or the locks
  // the flush thread may have held at the fork: capture switches, step
  // markers and flushes return at once, nothing is pushed or popped.
  const std::string before = fake_cupti_external();
  const pid_t child = fork();
  BOOST_TEST_REQUIRE(child >= 0);
  if (child == 0) {
    capture(0);
    capture(1);
    stallscope_step_end(9);
    stallscope_step_begin(11);
    stallscope_step_end(11);
    sym<int (*)()>(lib, "stallscope_cuda_flush_v1")();
    ::_exit(std::string(fake_cupti_external()) == before ? 0 : 1);
  }
  int st = -1;
  for (int i = 0; i < 500 && waitpid(child, &st, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (waitpid(child, &st, WNOHANG) == 0) {  // hung: fail, and do not leave it behind
    kill(child, SIGKILL);
    waitpid(child, &st, 0);
    BOOST_FAIL("the forked child hung in stallscope's CUDA hooks");
  }
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0), "child status " << st);
  BOOST_TEST(std::string(fake_cupti_external()) == before);

  // Another library subscribes: the interposed entry point lets stallscope
  // step aside, then forwards to CUPTI, which accepts the new subscriber.
  CUpti_SubscriberHandle other = nullptr;
  BOOST_TEST(cuptiSubscribe(&other, nullptr, nullptr) == CUPTI_SUCCESS);
  BOOST_TEST(fake_cupti_unsubscribes() == 1);
  BOOST_TEST(fake_cupti_subscribers() == 1);
  BOOST_TEST(std::string(fake_cupti_subscriber()) == "plain");
  BOOST_TEST(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 0);
  BOOST_TEST(fake_cupti_enabled(CUPTI_ACTIVITY_KIND_DEVICE) == 0);
  // What was pushed is popped; after the hand-over nothing is pushed.
  stallscope_step_end(9);
  stallscope_step_begin(10);
  stallscope_step_end(10);
  BOOST_TEST(std::string(fake_cupti_external()) == "+5-5+8-8+9-9+10-10");
  // After the hand-over the buffers are the other tool's: no more flushes.
  const int flushes = fake_cupti_default_flushes();
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  BOOST_TEST(fake_cupti_default_flushes() == flushes);
  stallscope_shutdown();

  std::string err;
  // This process's file (the forked child above wrote its own, its pid in its name).
  std::vector<std::string> files;
  for (const auto& f : rd::list_trace_files(g_out / "run", &err))
    if (f.find(std::to_string(::getpid())) != std::string::npos) files.push_back(f);
  BOOST_TEST_REQUIRE(files.size() == 1u, err);
  rd::TraceReader r(files[0]);
  rd::Event e;
  int kernels = 0, device_kernels = 0, flushed_kernels = 0, handed = 0, cupti_named = 0;
  std::map<std::string, double> counters;
  while (r.next(e)) {
    if (e.kind_enum() == fmt::Kind::kKernel && r.string(e.name_id) == "fake_device_kernel") {
      ++device_kernels;
    } else if (e.kind_enum() == fmt::Kind::kKernel &&
               r.string(e.name_id) == "fake_flushed_kernel") {
      ++flushed_kernels;
      BOOST_TEST(e.ts_ns >= staged_t0);
      BOOST_TEST(e.ts_ns <= staged_t1);
      BOOST_TEST(e.dur_ns == 500);
      BOOST_TEST(e.device.h.aux == 9u);
    } else if (e.kind_enum() == fmt::Kind::kKernel) {
      ++kernels;
      BOOST_TEST(r.string(e.name_id) == "fake_kernel");
      BOOST_TEST(e.ts_ns >= t0);  // stamped by our callback: CLOCK_MONOTONIC
      BOOST_TEST(e.ts_ns <= t1);
      BOOST_TEST(e.dur_ns == 1000);
      BOOST_TEST(e.device.h.aux == 7u);
    } else if (e.kind_enum() == fmt::Kind::kCounter) {
      counters[std::string(r.string(e.name_id))] = e.number();
    } else if (e.kind_enum() == fmt::Kind::kMark) {
      const std::string text(r.string(e.name_id));
      handed += text.rfind("GPU activity handed to ", 0) == 0 &&
                text.find("(cuptiSubscribe)") != std::string::npos;
      // Which CUPTI recorded, and how it was found.
      cupti_named += text == std::string("CUPTI ") + STALLSCOPE_FAKE_CUPTI + " (STALLSCOPE_CUPTI_LIB)";
    }
  }
  BOOST_TEST(kernels == 3);
  BOOST_TEST(device_kernels == 2);
  BOOST_TEST(flushed_kernels == 4);
  BOOST_TEST(counters["cupti.dropped_records"] == 5.0);
  BOOST_TEST(counters["cupti.zero_timestamp_records"] == 1.0);
  BOOST_TEST(counters["cupti.unknown_kind_records"] == 1.0);
  BOOST_TEST(handed == 1);
  BOOST_TEST(cupti_named == 1);

  // One "cuda.device" per device that ran work, whatever the order of its
  // record and its work; the unnamed one from the hand-over, when no device
  // record can come any more.
  std::map<uint32_t, std::string> devices;
  int attached = 0;
  for (const auto& a : r.attachments()) {
    if (a.name != "cuda.device") continue;
    ++attached;
    devices[nlohmann::json::parse(a.data).at("id").get<uint32_t>()] = a.data;
  }
  BOOST_TEST(attached == 3);
  BOOST_TEST_REQUIRE(devices.size() == 3u);
  BOOST_TEST(devices.count(1) == 0u);  // named, ran nothing
  BOOST_TEST(devices[0] == R"({"id":0,"uuid":"GPU-3fa29c01-8e4b-7d10-c56e-f00dba112299",)"
                           R"("name":"NVIDIA H200","mig":false})");
  const auto d3 = nlohmann::json::parse(devices[3]);
  BOOST_TEST(d3.at("uuid").get<std::string>() == "GPU-ff000000-0000-0000-0000-000000000003");
  BOOST_TEST(d3.at("name").get<std::string>() == "NVIDIA \"H200\" MIG\n");
  BOOST_TEST(d3.at("mig").get<bool>());
  BOOST_TEST(devices[2] == R"({"id":2,"uuid":"","name":""})");
}

BOOST_AUTO_TEST_SUITE_END()
