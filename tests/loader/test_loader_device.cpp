// The emulated device (timing from its model, no host core while it
// holds a copy), the CUDA fallback line, locked memory refused by a
// memlock limit without CAP_IPC_LOCK (RELIABILITY.md 23), and host memory
// with and without the huge-page advice.
#include <boost/test/unit_test.hpp>

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "skip_visibly.hpp"
#include "loader_fixtures.hpp"
#include "stallscope/loader/device.hpp"

using namespace stallscope;
using namespace stallscope::test;
namespace sl = stallscope::loader;

namespace {
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}
double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Where a CUDA driver is present there is nothing to degrade.
boost::test_tools::assertion_result without_a_cuda_driver(boost::unit_test::test_unit_id) {
  static const bool emulated = [] {
    std::string why;
    auto dev = sl::make_device(sl::DeviceKind::kAuto, {}, &why);
    return dev == nullptr || dev->emulated();
  }();
  boost::test_tools::assertion_result r(emulated);
  r.message() << "a CUDA driver is present";
  return r;
}
// The VmFlags line of /proc/self/smaps for the mapping that holds p ("" if none).
std::string vm_flags_of(const void* p) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}
}  // namespace

BOOST_AUTO_TEST_SUITE(loader_device)

BOOST_AUTO_TEST_CASE(emulated_copies_take_the_modelled_time_without_a_host_core) {
  auto dev = sl::make_emulated_device({1.0, 0.5});  // 1 GB/s pinned, 0.5 GB/s pageable
  BOOST_REQUIRE(dev);
  const uint64_t bytes = 64u << 20;
  sl::HostBuffer pinned = dev->alloc_host(bytes, true);
  sl::HostBuffer pageable = dev->alloc_host(bytes, false);
  BOOST_REQUIRE(pinned.data && pageable.data);
  BOOST_TEST(!pageable.pinned);
  double w0 = wall_s(), c0 = cpu_s();
  dev->wait(dev->copy_h2d(pinned, bytes, 1));
  const double pinned_wall = wall_s() - w0, pinned_cpu = cpu_s() - c0;
  w0 = wall_s();
  dev->wait(dev->copy_h2d(pageable, bytes, 2));
  const double pageable_wall = wall_s() - w0;
  // Never shorter than modelled; a loaded machine only adds to each, so
  // there is no upper bound but the pageable copy's model, twice as long.
  BOOST_TEST(pinned_wall >= bytes / 1e9);
  BOOST_TEST(pageable_wall >= bytes / 0.5e9);
  BOOST_TEST(pinned_wall < pageable_wall);
  BOOST_TEST(pinned_cpu < 0.2 * pinned_wall);  // the device holds it sleeping
  BOOST_TEST(dev->stats().copies == 2u);
  BOOST_TEST(dev->model_json().find("\"h2d_pinned_gbps\":1.0") != std::string::npos,
             dev->model_json());
  dev->free_host(pinned);
  dev->free_host(pageable);
}

BOOST_AUTO_TEST_CASE(no_driver_degrades_to_the_emulated_device_with_one_line,
                     *stallscope::test::skip_unless(without_a_cuda_driver)) {
  std::string why;
  auto dev = sl::make_device(sl::DeviceKind::kAuto, {}, &why);
  BOOST_REQUIRE(dev);
  BOOST_TEST_REQUIRE(dev->emulated());
  BOOST_TEST(why.rfind("no CUDA driver: ", 0) == 0u, why);
  BOOST_TEST(why.find("using the emulated device") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(memlock_refused_falls_back_to_unlocked_and_unregistered) {
  FileSet files({100000, 5, 40000, 3000000});
  // A user of its own: io_uring charges a ring made without CAP_IPC_LOCK to
  // its user's locked memory, which other processes of the same user (perf
  // ring buffers of a concurrent test, nobody's rings) share.
  const auto r = run_cmd({"setpriv", "--reuid=64123", "--regid=64123", "--clear-groups",
                          "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock",
                          "prlimit", "--memlock=65536", loader_probe_path(), "epoch",
                          files.root(), "--loader-device=emulated", "--loader-backend=uring",
                          "--loader-direct=on", "--loader-probe=0"});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "exit " << r.exit_code << ": " << r.err);
  BOOST_TEST(r.value("samples") == 4);
  BOOST_TEST(r.value("mismatches") == 0);
  BOOST_TEST(r.value("fixed_reads") == 0);
#if defined(__SANITIZE_ADDRESS__)
  BOOST_TEST_MESSAGE("ASan turns mlock into a no-op: the lock refusal is not observable here");
#else
  BOOST_TEST(r.err.find("cannot lock staging memory") != std::string::npos, r.err);
#endif
  BOOST_TEST(r.err.find("registered buffers refused (ENOMEM") != std::string::npos, r.err);
  const auto root = run_cmd({loader_probe_path(), "epoch", files.root(), "--loader-device=emulated",
                             "--loader-backend=uring", "--loader-direct=on", "--loader-probe=0"});
  BOOST_TEST(root.value("fixed_reads") > 0, root.out << root.err);  // with CAP_IPC_LOCK: registered
}

// HUGE_PAGES=off (Pages::kBase) maps a large buffer without MADV_HUGEPAGE
// ("hg" in the mapping's VmFlags); both kinds are usable and freed alike.
BOOST_AUTO_TEST_CASE(base_pages_are_mapped_without_the_huge_page_advice) {
  const uint64_t bytes = 4u << 20;
  bool locked = true;
  void* huge = sl::alloc_locked(bytes, false, &locked, sl::Pages::kHuge);
  void* base = sl::alloc_locked(bytes, false, &locked, sl::Pages::kBase);
  BOOST_REQUIRE((huge != nullptr && base != nullptr));
  BOOST_TEST(!locked);
  std::memset(huge, 1, bytes);
  std::memset(base, 1, bytes);
  BOOST_TEST(reinterpret_cast<uintptr_t>(huge) % (2u << 20) == 0u);
  const std::string hf = vm_flags_of(huge), bf = vm_flags_of(base);
  BOOST_TEST(!bf.empty());
  BOOST_TEST(bf.find(" hg") == std::string::npos, bf);
  // The advice is refused where THP is compiled out (EINVAL): nothing to see.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (thp) BOOST_TEST(hf.find(" hg") != std::string::npos, hf);
  sl::free_locked(huge, bytes, false);
  sl::free_locked(base, bytes, false);
}

BOOST_AUTO_TEST_SUITE_END()
