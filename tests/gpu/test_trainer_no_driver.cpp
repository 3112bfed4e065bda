// The sample trainer's --device flag where no CUDA driver is present (runs
// on every machine; exits 77 where a driver loads, as the GPU machine
// checks the CUDA path in test_gpu_trainer): --device cuda refuses with
// "no CUDA driver: …" and exit code 2, --device auto falls back to the
// emulated device in one line and still traces every step.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <cstdio>

#include <boost/test/unit_test.hpp>

#include "gpu/trainer_run.hpp"

using namespace trainer_test;

BOOST_AUTO_TEST_SUITE(trainer_no_driver)

BOOST_AUTO_TEST_CASE(device_cuda_exits_2_naming_the_missing_driver) {
  attach::TempDir t;
  const std::string ds = make_dataset(t.path(), 64, 8);
  const int code = train(t.path(), {"--data", ds, "--steps", "3", "--device", "cuda"});
  const std::string log = attach::slurp(t.path() + "/trainer.log");
  BOOST_TEST(code == 2, log);
  BOOST_TEST(log.find("trainer: no CUDA driver: ") != std::string::npos, log);
  BOOST_TEST(log.find("(--device cuda)") != std::string::npos, log);
  BOOST_TEST(log.find("steps, step p50") == std::string::npos, log);  // nothing trained
}

BOOST_AUTO_TEST_CASE(bad_device_value_is_a_usage_error) {
  attach::TempDir t;
  const int code = train(t.path(), {"--data", t.path(), "--device", "gpu"});
  BOOST_TEST(code == 2);
  BOOST_TEST(attach::slurp(t.path() + "/trainer.log").find("bad value 'gpu' for --device") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(device_auto_falls_back_to_emulated_and_traces_every_step) {
  attach::TempDir t;
  const std::string ds = make_dataset(t.path(), 200, 16);
  const int code =
      train(t.path(), {"--data", ds, "--steps", "12", "--compute-ms", "30", "--device", "auto"});
  const std::string log = attach::slurp(t.path() + "/trainer.log");
  BOOST_TEST_REQUIRE(code == 0, log);
  BOOST_TEST(log.find("--device auto: no CUDA driver: ") != std::string::npos, log);
  BOOST_TEST(log.find("; using the emulated device") != std::string::npos, log);
  BOOST_TEST(log.find("trainer rank 0: 12 steps") != std::string::npos, log);
  const auto r = report_rank0(t.path());
  BOOST_TEST_REQUIRE(r.is_object(), attach::slurp(t.path() + "/report.log"));
  BOOST_TEST(r["steps"]["total"].get<int>() == 12);
  BOOST_TEST(r["step_source"]["kind"].get<std::string>() == "step_events");
  // 30 ms of emulated compute per step dominates a small cached dataset,
  // even when other tests share the cores (8 ms once lost to the loader).
  BOOST_TEST(r["cause"].get<std::string>().find("compute-bound") != std::string::npos,
             r["cause"].dump());
}

BOOST_AUTO_TEST_SUITE_END()

bool init_unit_test() { return true; }

int main(int argc, char** argv) {
  if (have_driver()) {
    std::printf("SKIP: a CUDA driver is present: the no-driver path cannot be checked here\n");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
