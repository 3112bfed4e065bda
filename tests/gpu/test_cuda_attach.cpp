// libstallscope_cuda.so through its C ABI and its NCCL plugin symbols, as
// the shim and NCCL use it: attach without a driver says so in one line;
// the profiler plugin of every declared version records collectives.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "skip_visibly.hpp"
#include "libtrace/probe_runner.hpp"
#include "stallscope/cuda/nccl_profiler_v4.h"
#include "stallscope/cuda/nccl_profiler_v6.h"
#include "stallscope/reader.hpp"
#include "stallscope/trace.h"

namespace {

const std::string kLib = std::string(STALLSCOPE_TEST_BINARY_DIR) + "/lib/libstallscope_cuda.so";
stallscope::test::TempDir g_out;

// Recording goes to a fresh run directory; set before the first event.
struct Env {
  Env() {
    setenv("STALLSCOPE_OUT", (g_out / "run").c_str(), 1);
    setenv("STALLSCOPE_QUIET", "0", 1);
  }
};
Env g_env;

void* lib() {
  static void* h = dlopen(kLib.c_str(), RTLD_NOW | RTLD_LOCAL);
  BOOST_TEST_REQUIRE(h != nullptr, dlerror());
  return h;
}

// Descriptor 2 names one file for the whole run, from before the library
// is loaded: stallscope's notes go out only while descriptor 2 names the
// file it named at load (RELIABILITY.md 41), so a capture must not swap it.
// What the run wrote there is copied to the real stderr at exit.
struct StderrFile {
  int real = -1;
  std::string path = g_out / "stderr.txt";
  StderrFile() {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (fd < 0) return;
    fflush(stderr);
    real = dup(2);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrFile() {
    if (real < 0) return;
    fflush(stderr);
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    (void)!write(real, text.data(), text.size());
  }
};
StderrFile g_stderr;

// Runs `fn` and returns what it wrote on stderr.
template <typename F>
std::string capture_stderr(F fn) {
  fflush(stderr);
  const off_t from = lseek(2, 0, SEEK_END);
  fn();
  fflush(stderr);
  std::ifstream in(g_stderr.path);
  in.seekg(from);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int g_topology_attachments = 0;

std::vector<stallscope::reader::Event> collectives() {
  stallscope_shutdown();
  std::string err;
  auto files = stallscope::reader::list_trace_files(g_out / "run", &err);
  BOOST_TEST_REQUIRE(files.size() == 1u, err);
  stallscope::reader::TraceReader r(files[0]);
  std::vector<stallscope::reader::Event> out;
  for (const auto& a : r.attachments()) g_topology_attachments += a.name == "topology";
  stallscope::reader::Event e;
  while (r.next(e))
    if (e.kind_enum() == stallscope::format::Kind::kCollective) out.push_back(e);
  return out;
}

// The no-driver case needs a machine without libcuda.so.1.
boost::test_tools::assertion_result without_a_cuda_driver(boost::unit_test::test_unit_id) {
  void* d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (d != nullptr) dlclose(d);
  boost::test_tools::assertion_result r(d == nullptr);
  r.message() << "a CUDA driver is present; the no-driver case cannot run here";
  return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_attach)

BOOST_AUTO_TEST_CASE(without_a_driver_attach_says_so_in_one_line,
                     *stallscope::test::skip_unless(without_a_cuda_driver)) {
  auto attach = reinterpret_cast<int (*)()>(dlsym(lib(), "stallscope_cuda_attach_v1"));
  BOOST_TEST_REQUIRE(attach != nullptr);
  int rc = 0;
  const std::string err = capture_stderr([&] { rc = attach(); });
  BOOST_TEST(rc == -ENODEV);
  BOOST_TEST(err.find("stallscope: no CUDA driver: GPU activity not recorded") == 0u, err);
  BOOST_TEST(std::count(err.begin(), err.end(), '\n') == 1, err);
  // Later calls return the same without a second line; flush and capture
  // toggles are harmless.
  std::string again = capture_stderr([&] {
    rc = attach();
    reinterpret_cast<int (*)()>(dlsym(lib(), "stallscope_cuda_flush_v1"))();
    reinterpret_cast<void (*)(int)>(dlsym(lib(), "stallscope_cuda_capture_v1"))(0);
    reinterpret_cast<void (*)(int)>(dlsym(lib(), "stallscope_cuda_capture_v1"))(1);
  });
  BOOST_TEST(rc == -ENODEV);
  BOOST_TEST(again.empty(), again);
  auto request = reinterpret_cast<int (*)(const char*, const char*)>(
      dlsym(lib(), "stallscope_cuda_cupti_request_v1"));
  BOOST_TEST(request("cuptiSubscribe", "libkineto") == 1);  // nothing held: forward
}

BOOST_AUTO_TEST_CASE(every_declared_plugin_version_records_collectives) {
  stallscope_init();
  reinterpret_cast<int (*)()>(dlsym(lib(), "stallscope_cuda_attach_v1"))();  // once per process
  auto* v4 = static_cast<ncclProfiler_v4_t*>(dlsym(lib(), "ncclProfiler_v4"));
  auto* v5 = static_cast<ncclProfiler_v5_t*>(dlsym(lib(), "ncclProfiler_v5"));
  auto* v6 = static_cast<ncclProfiler_v6_t*>(dlsym(lib(), "ncclProfiler_v6"));
  BOOST_TEST_REQUIRE((v4 && v5 && v6));
  BOOST_TEST(std::string(v5->name) == "stallscope");

  void* ctx5 = nullptr;
  int mask = 0;
  BOOST_TEST_REQUIRE(v5->init(&ctx5, 0xfeed, &mask, "c", 1, 4, 2, nullptr) == ncclSuccess);
  BOOST_TEST((mask & ncclProfileColl) != 0);
  BOOST_TEST((mask & ncclProfileP2p) != 0);
  ncclProfilerEventDescr_v5_t d{};
  d.type = ncclProfileColl;
  d.rank = 2;
  d.coll.func = "AllReduce";
  d.coll.count = 1024;
  d.coll.datatype = "ncclFloat32";
  void* h = nullptr;
  BOOST_TEST(v5->startEvent(ctx5, &h, &d) == ncclSuccess);
  BOOST_TEST_REQUIRE(h != nullptr);
  BOOST_TEST(v5->stopEvent(h) == ncclSuccess);
  ncclProfilerEventDescr_v5_t p{};
  p.type = ncclProfileP2p;
  p.p2p.func = "Send";
  p.p2p.count = 10;
  p.p2p.datatype = "ncclBfloat16";
  p.p2p.peer = 3;
  v5->startEvent(ctx5, &h, &p);
  v5->stopEvent(h);
  ncclProfilerEventDescr_v5_t other{};
  other.type = ncclProfileProxyOp;  // not asked for: no handle, no event
  v5->startEvent(ctx5, &h, &other);
  BOOST_TEST(h == nullptr);
  BOOST_TEST(v5->stopEvent(nullptr) == ncclSuccess);

  void* ctx4 = nullptr;
  BOOST_TEST_REQUIRE(v4->init(&ctx4, &mask, "c4", 0xbeef, 1, 2, 1, nullptr) == ncclSuccess);
  ncclProfilerEventDescr_v4_t d4{};
  d4.type = ncclProfileColl;
  d4.coll.func = "AllGather";
  d4.coll.count = 8;
  d4.coll.datatype = "ncclInt64";
  v4->startEvent(ctx4, &h, &d4);
  v4->stopEvent(h);

  void* ctx6 = nullptr;
  BOOST_TEST_REQUIRE(v6->init(&ctx6, 0xcafe, &mask, "c6", 1, 1, 0, nullptr) == ncclSuccess);
  ncclProfilerEventDescr_v6_t d6{};
  d6.type = ncclProfileColl;
  d6.coll.func = "Broadcast";
  d6.coll.count = 3;
  d6.coll.datatype = "ncclUint8";
  v6->startEvent(ctx6, &h, &d6);
  v6->stopEvent(h);
  v4->finalize(ctx4);
  v5->finalize(ctx5);
  v6->finalize(ctx6);

  const auto ev = collectives();
  BOOST_TEST_REQUIRE(ev.size() == 4u);
  using stallscope::format::CollOp;
  BOOST_TEST((ev[0].collective.h.aux & 0xff) == static_cast<uint32_t>(CollOp::kAllReduce));
  BOOST_TEST(ev[0].collective.bytes == 4096u);
  BOOST_TEST(ev[0].collective.comm_id == 0xfeedu);
  BOOST_TEST(ev[0].collective.rank == 2u);
  BOOST_TEST(ev[0].collective.nranks == 4u);
  BOOST_TEST(ev[0].collective.seq == 0u);
  for (const auto& e : ev) BOOST_TEST((e.collective.flags & stallscope::format::kCollEnqueued) != 0u);
  BOOST_TEST(ev[1].collective.bytes == 20u);
  BOOST_TEST(ev[1].collective.peer == 3);
  BOOST_TEST(ev[1].collective.seq == 1u);
  BOOST_TEST(ev[2].collective.comm_id == 0xbeefu);
  BOOST_TEST(ev[2].collective.bytes == 64u);
  BOOST_TEST(ev[2].collective.seq == 0u);
  BOOST_TEST(ev[3].collective.comm_id == 0xcafeu);
  BOOST_TEST((ev[3].collective.h.aux & 0xff) == static_cast<uint32_t>(CollOp::kBroadcast));
  BOOST_TEST(ev[3].collective.bytes == 3u);
  // attach() recorded the machine's topology once, whatever CUPTI did.
  BOOST_TEST(g_topology_attachments == 1);
}

BOOST_AUTO_TEST_SUITE_END()
