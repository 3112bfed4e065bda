// The sample trainer on a real GPU (label gpu; exits 77 where no CUDA
// driver or device): --device cuda runs forward/backward as spin kernels of
// the modelled time, and the analyzer's verdict follows the injected cause:
// 20 ms of compute per step is compute-bound; 128 MB pageable batches
// copied on the compute stream (--copy-in-step) with 2 ms of compute are
// H2D-bound.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <cstdio>

#include <boost/test/unit_test.hpp>

#include "gpu/trainer_run.hpp"

using namespace trainer_test;

namespace {

std::string cause(const nlohmann::json& r) {
  return r.is_object() && r.contains("cause") ? r["cause"].get<std::string>() : "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_trainer)

BOOST_AUTO_TEST_CASE(compute_bound_steps_take_the_modelled_kernel_time) {
  attach::TempDir t;
  const std::string ds = make_dataset(t.path(), 400, 16);
  const int code = train(t.path(), {"--data", ds, "--steps", "30", "--compute-ms", "20", "--device",
                                    "cuda", "--sync-each-step"});
  const std::string log = attach::slurp(t.path() + "/trainer.log");
  BOOST_TEST_REQUIRE(code == 0, log);
  BOOST_TEST(log.find("trainer: CUDA device") != std::string::npos, log);
  const auto r = report_rank0(t.path());
  BOOST_TEST_REQUIRE(r.is_object(), attach::slurp(t.path() + "/report.log"));
  BOOST_TEST(r["steps"]["total"].get<int>() == 30);
  BOOST_TEST(cause(r).find("compute-bound") != std::string::npos, cause(r));
  // 20 ms forward+backward + 0.5 ms update, calibrated by events: ±25 %.
  const double p50 = r["steps"]["p50_ms"].get<double>();
  BOOST_TEST(p50 > 15.0);
  BOOST_TEST(p50 < 26.0);
}

BOOST_AUTO_TEST_CASE(pageable_copy_in_step_is_h2d_bound) {
  attach::TempDir t;
  const std::string ds = make_dataset(t.path(), 256, 16);
  const int code = train(t.path(), {"--data", ds, "--steps", "20", "--compute-ms", "2", "--device",
                                    "cuda", "--copy-in-step", "--loader-pinned=off",
                                    "--loader-batch-size=32", "--sample-bytes", "4000000"});
  const std::string log = attach::slurp(t.path() + "/trainer.log");
  BOOST_TEST_REQUIRE(code == 0, log);
  const auto r = report_rank0(t.path());
  BOOST_TEST_REQUIRE(r.is_object(), attach::slurp(t.path() + "/report.log"));
  BOOST_TEST(r["steps"]["total"].get<int>() == 20);
  BOOST_TEST(cause(r).find("H2D") != std::string::npos, cause(r));
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (!have_driver()) {
    std::printf("SKIP: no CUDA driver here: the trainer's CUDA device needs a GPU\n");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
