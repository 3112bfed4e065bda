// CUDA injection without a GPU: a stand-in driver loads
// CUDA_INJECTION64_PATH (set by the shim to itself) and calls
// InitializeInjection, which loads libstallscope_cuda.so from the shim's
// directory and calls stallscope_cuda_attach_v1; when that library is
// missing or fails, the trace says "GPU activity unavailable: <why>".
#include <boost/test/unit_test.hpp>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

// A copy of the shim in its own directory, with `cuda_lib` next to it.
std::string shim_copy(const TempDir& dir, const std::string& cuda_lib) {
  std::filesystem::create_directories(dir / "lib");
  std::filesystem::copy_file(shim(), dir / "lib/libstallscope_preload.so");
  if (!cuda_lib.empty()) std::filesystem::copy_file(cuda_lib, dir / "lib/libstallscope_cuda.so");
  return dir / "lib/libstallscope_preload.so";
}

std::vector<std::string> marks(const std::string& run_dir) {
  std::vector<std::string> out;
  for (const Ev& e : load_run(run_dir).of_kind(format::Kind::kMark)) out.push_back(e.name);
  return out;
}

bool has_prefix(const std::vector<std::string>& v, const std::string& p) {
  for (const auto& s : v) if (s.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_cuda)

BOOST_AUTO_TEST_CASE(missing_gpu_library_is_reported) {
  TempDir dir;
  const std::string copy = shim_copy(dir, "");
  const RunResult r = run({helper("fake_driver")}, {{"STALLSCOPE_OUT", dir / "run"},
                                                   {"LD_PRELOAD", copy}}, false);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.value("INIT") == 1);
  const auto m = marks(dir / "run");
  BOOST_TEST(has_prefix(m, "GPU activity unavailable: cannot load " + dir.path() + "/lib/libstallscope_cuda.so"));
}

BOOST_AUTO_TEST_CASE(failing_attach_is_reported_once) {
  TempDir dir;
  const std::string copy = shim_copy(dir, helper("libfake_cuda.so"));
  const RunResult r = run({helper("fake_driver")}, {{"STALLSCOPE_OUT", dir / "run"},
                                                   {"LD_PRELOAD", copy},
                                                   {"FAKE_CUDA_RESULT", "-19"}}, false);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("ATTACH_CALLED") == r.out.rfind("ATTACH_CALLED"));  // once
  const auto m = marks(dir / "run");
  BOOST_TEST(has_prefix(m, "GPU activity unavailable: stallscope_cuda_attach_v1 failed: No such device"));
}

BOOST_AUTO_TEST_CASE(attached_library_sets_the_nccl_plugin) {
  TempDir dir;
  const std::string copy = shim_copy(dir, helper("libfake_cuda.so"));
  const RunResult r = run({helper("fake_driver")}, {{"STALLSCOPE_OUT", dir / "run"},
                                                   {"LD_PRELOAD", copy}}, false);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("ATTACH_CALLED") != std::string::npos);
  BOOST_TEST(!has_prefix(marks(dir / "run"), "GPU activity unavailable"));
  const RunResult env = run({"/usr/bin/env"}, {{"STALLSCOPE_OUT", dir / "run2"}, {"LD_PRELOAD", copy}},
                            false);
  BOOST_TEST(env.out.find("NCCL_PROFILER_PLUGIN=" + dir.path() + "/lib/libstallscope_cuda.so") !=
             std::string::npos, env.out);
  BOOST_TEST(env.out.find("CUDA_INJECTION64_PATH=" + copy) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(another_cupti_subscriber_is_handed_over_or_refused) {
  TempDir dir;
  const std::string copy = shim_copy(dir, helper("libfake_cuda.so"));
  // yield: stallscope steps aside and the call goes on to CUPTI (absent
  // here: CUPTI_ERROR_UNKNOWN, 999).
  RunResult r = run({helper("fake_driver")}, {{"STALLSCOPE_OUT", dir / "run"}, {"LD_PRELOAD", copy},
                                             {"FAKE_CUPTI_ANSWER", "1"}}, false);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("REQUEST cuptiSubscribe fake_driver") != std::string::npos, r.out);
  BOOST_TEST(r.value("SUBSCRIBE") == 999);
  // keep: refused as CUPTI refuses a second subscriber.
  r = run({helper("fake_driver")}, {{"STALLSCOPE_OUT", dir / "run2"}, {"LD_PRELOAD", copy},
                                   {"FAKE_CUPTI_ANSWER", "0"}}, false);
  BOOST_TEST(r.value("SUBSCRIBE") == 39);
}

BOOST_AUTO_TEST_SUITE_END()
