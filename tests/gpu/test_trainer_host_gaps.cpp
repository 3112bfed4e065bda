// What the host did while the device idled, on the sample trainer's own
// runs on the emulated device (report-guide.md "Host gaps"): a sync every
// step followed by host work is a sync gap whose remedy recovers about that
// work; many kernels shorter than their launches are launch gaps whose
// first remedy is a CUDA graph. Verdicts strict, gains with tolerance.
#include <boost/test/unit_test.hpp>

#include "gpu/trainer_run.hpp"

using namespace trainer_test;

namespace {

double class_share(const nlohmann::json& r, const std::string& cls) {
  const auto& c = r["host_gaps"]["classes"];
  return c.contains(cls) ? c[cls]["share"].get<double>() : 0.0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trainer_host_gaps)

// 10 ms of compute, then loss.item() and 8 ms of host work (logging) each
// step: the device idles about 8 ms after every sync (≥ 40 % of the step).
BOOST_AUTO_TEST_CASE(a_sync_every_step_is_a_sync_gap_with_avoid_sync_first) {
  attach::TempDir t;
  const std::string ds = make_dataset(t.path(), 128, 8);
  const int code = train(t.path(), {"--data", ds, "--steps", "24", "--device", "emulated",
                                    "--compute-ms", "10", "--sync-each-step", "--host-ms", "8"});
  BOOST_TEST_REQUIRE(code == 0, attach::slurp(t.path() + "/trainer.log"));
  const auto r = report_rank0(t.path());
  BOOST_TEST_REQUIRE(r.is_object(), attach::slurp(t.path() + "/report.log"));
  BOOST_TEST(r["cause"].get<std::string>().rfind("host-bound: host after sync", 0) == 0,
             r["cause"].dump());
  BOOST_TEST(r["host_gaps"]["analyzed"].get<bool>());
  BOOST_TEST(class_share(r, "sync") >= 0.3, r["host_gaps"].dump());
  BOOST_TEST(r["host_gaps"]["sync_call"].get<std::string>() == "loss.item() sync");
  BOOST_REQUIRE(!r["remedies"].empty());
  const auto& m = r["remedies"][0];
  BOOST_TEST(m["id"] == "avoid_sync", r["remedies"].dump());
  // The host work burns CPU: beside other busy programs it takes longer,
  // never shorter, than its 8 ms of CPU time.
  BOOST_TEST(m["gain_ms"].get<double>() >= 0.8 * 8.0, m.dump());
  BOOST_TEST(m["gain_ms"].get<double>() <= 0.9 * m["step_ms"].get<double>(), m.dump());
}

// 400 kernels of 10 µs per step (2 ms of compute besides), each launched by a call taking 40 µs of
// host CPU: the device waits for the launches.
BOOST_AUTO_TEST_CASE(kernels_shorter_than_their_launches_are_launch_gaps) {
  attach::TempDir t;
  const std::string ds = make_dataset(t.path(), 128, 8);
  const int code = train(t.path(), {"--data", ds, "--steps", "24", "--device", "emulated",
                                    "--device-burn", "--compute-ms", "2", "--tiny-kernels", "400"});
  BOOST_TEST_REQUIRE(code == 0, attach::slurp(t.path() + "/trainer.log"));
  const auto r = report_rank0(t.path());
  BOOST_TEST_REQUIRE(r.is_object(), attach::slurp(t.path() + "/report.log"));
  BOOST_TEST(r["cause"].get<std::string>().rfind("host-bound: launch/API", 0) == 0,
             r["cause"].dump());
  BOOST_TEST_MESSAGE("launch gaps " << class_share(r, "launch") << " of the step; " << r["cause"]);
  BOOST_TEST(class_share(r, "launch") >= 0.2, r["host_gaps"].dump());
  const auto& top = r["host_gaps"]["classes"]["launch"]["top"];
  BOOST_REQUIRE(!top.empty());
  BOOST_TEST(top[0]["name"] == "cudaLaunchKernel", top.dump());
  BOOST_REQUIRE(!r["remedies"].empty());
  BOOST_TEST(r["remedies"][0]["id"] == "cuda_graphs", r["remedies"].dump());
}

BOOST_AUTO_TEST_SUITE_END()
