// Host gaps of stallscope's own traces (events built with RankBuilder): a
// sync per step, many tiny kernels launched by calls longer than they run,
// an NVTX range and native stack samples in a gap;
// the class of each gap, its top activity and the top remedy's gain
// against the injected gap time.
#include <boost/test/unit_test.hpp>

#include "analyzer/rank_builder.hpp"

using namespace stallscope::testing;
namespace an = stallscope::analyzer;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_SUITE(host_gaps)

namespace {

constexpr int kSteps = 8;

const an::Remedy* find(const an::RankReport& r, const std::string& id) {
  for (const auto& m : r.remedies)
    if (m.id == id) return &m;
  return nullptr;
}

double class_ms(const an::RankReport& r, an::GapClass c) { return r.host_gaps.of(c).ms; }

int64_t host_ns(const an::StepResult& s) {
  return s.parts[an::idx(Part::kHostAfterSync)] + s.parts[an::idx(Part::kHostLaunch)] +
         s.parts[an::idx(Part::kHostCpu)] + s.parts[an::idx(Part::kHostBlocked)];
}

void check_partition(const an::RankReport& r) {
  for (const auto& s : r.steps) {
    int64_t sum = 0;
    for (int64_t g : s.gap_ns) sum += g;
    BOOST_TEST(sum == host_ns(s));
  }
}

}  // namespace

// Each step: compute 50 ms, the host waits in cudaStreamSynchronize (from
// train_step, seen by a stack sample), then 40 ms before the next kernel.
BOOST_AUTO_TEST_CASE(a_sync_per_step_is_a_sync_gap_naming_the_call_and_its_frame) {
  RankBuilder b;
  for (int i = 0; i < kSteps; ++i) {
    const double s = 100.0 * i;
    b.step(i, s, s + 100).kernel(s, s + 50).kernel(s + 90, s + 100);
    b.sync("cudaStreamSynchronize", s + 10, s + 50).stack("train.py(42): train_step", s + 30, 40);
  }
  const auto r = b.analyze();
  check_partition(r);
  BOOST_TEST(class_ms(r, an::GapClass::kSync) == 40.0, tt::tolerance(1e-9));
  BOOST_TEST(class_ms(r, an::GapClass::kCpuOp) == 0.0);
  BOOST_TEST(r.host_gaps.sync_call == "cudaStreamSynchronize");
  BOOST_TEST(r.host_gaps.sync_made_by == "train.py(42): train_step");
  BOOST_REQUIRE(!r.host_gaps.longest.empty());
  BOOST_TEST(an::gap_class_key(r.host_gaps.longest[0].cls) == "sync");
  BOOST_TEST(r.host_gaps.longest[0].start_ms == 50.0, tt::tolerance(1e-9));
  BOOST_REQUIRE(!r.remedies.empty());
  BOOST_TEST(r.remedies[0].id == "avoid_sync");
  BOOST_TEST(r.remedies[0].gain_ms() == 40.0, tt::tolerance(0.10));
  BOOST_TEST(r.remedies[0].evidence.find("cudaStreamSynchronize") != std::string::npos);
}

// Each step: compute 40 ms, then 100 launches of 0.5 ms each followed by a
// 0.1 ms kernel: 50 ms of launch-bound gaps.
BOOST_AUTO_TEST_CASE(tiny_kernels_behind_longer_launches_are_launch_gaps) {
  RankBuilder b;
  for (int i = 0; i < kSteps; ++i) {
    const double s = 100.0 * i;
    b.step(i, s, s + 100).kernel(s, s + 40);
    for (int k = 0; k < 100; ++k) {
      const double at = s + 40 + 0.6 * k;
      b.api("cudaLaunchKernel", at, at + 0.5).kernel(at + 0.5, at + 0.6);
    }
  }
  const auto r = b.analyze();
  check_partition(r);
  BOOST_TEST(class_ms(r, an::GapClass::kLaunch) == 50.0, tt::tolerance(1e-6));
  BOOST_TEST(r.host_gaps.launches == 100.0, tt::tolerance(1e-9));
  BOOST_REQUIRE(!r.host_gaps.of(an::GapClass::kLaunch).top.empty());
  BOOST_TEST(r.host_gaps.of(an::GapClass::kLaunch).top[0].name == "cudaLaunchKernel");
  BOOST_REQUIRE(!r.remedies.empty());
  const an::Remedy& m = r.remedies[0];
  BOOST_TEST(m.id == "cuda_graphs");
  BOOST_TEST(m.bound);
  BOOST_TEST(m.gain_ms() == 50.0, tt::tolerance(0.10));
  BOOST_TEST(m.evidence.find("cudaLaunchKernel") != std::string::npos);
  // The fixed host cost also proposes a larger batch, predicted at half of it.
  const an::Remedy* lb = find(r, "larger_batch");
  BOOST_REQUIRE(lb != nullptr);
  BOOST_TEST(lb->gain_ms() == 25.0, tt::tolerance(0.10));
  BOOST_TEST(lb->evidence.find("convergence") != std::string::npos);
}

// Each step: compute 40 ms, then 50 ms with no device work. In it an NVTX
// range (the injection records a named kRange) covers 22 ms and native
// stack samples (the shim's perf_event_open sampler, the leaf burn_cpu)
// 18 ms: a cpu_op gap, each of them one of its top activities.
BOOST_AUTO_TEST_CASE(an_nvtx_range_and_native_stack_samples_are_top_activities_of_a_gap) {
  RankBuilder b;
  for (int i = 0; i < kSteps; ++i) {
    const double s = 100.0 * i;
    b.step(i, s, s + 100).kernel(s, s + 40).kernel(s + 90, s + 100);
    b.range("compute_loss", b.trainer, s + 45, s + 67);
    b.stack("burn_cpu", s + 71, 6, stallscope::format::kStackNative);
    b.stack("burn_cpu", s + 77, 6, stallscope::format::kStackNative);
    b.stack("burn_cpu", s + 83, 6, stallscope::format::kStackNative);
  }
  const auto r = b.analyze();
  check_partition(r);
  BOOST_TEST(class_ms(r, an::GapClass::kCpuOp) == 50.0, tt::tolerance(1e-6));
  const auto& top = r.host_gaps.of(an::GapClass::kCpuOp).top;
  BOOST_REQUIRE(top.size() == 2u);
  BOOST_TEST(top[0].name == "compute_loss");
  BOOST_TEST(top[0].kind == "annotation");
  BOOST_TEST(top[0].ms == 22.0, tt::tolerance(1e-6));
  BOOST_TEST(top[1].name == "burn_cpu");
  BOOST_TEST(top[1].kind == "stack_sample");
  BOOST_TEST(top[1].ms == 18.0, tt::tolerance(1e-6));
  BOOST_REQUIRE(!r.host_gaps.longest.empty());
  BOOST_TEST(an::gap_class_key(r.host_gaps.longest[0].cls) == "cpu_op");
  BOOST_TEST(r.host_gaps.longest[0].top == "compute_loss");
}

// Without device activity there are no device-idle gaps: nothing classed.
BOOST_AUTO_TEST_CASE(a_cpu_only_rank_has_no_gap_classes) {
  RankBuilder b;
  for (int i = 0; i < kSteps; ++i) b.step(i, 100.0 * i, 100.0 * i + 100).range("forward", b.trainer, 100.0 * i, 100.0 * i + 50);
  const auto r = b.analyze();
  BOOST_TEST(!r.host_gaps.analyzed);
  BOOST_TEST(!r.host_gaps.note.empty());
  for (const auto& s : r.steps)
    for (int64_t g : s.gap_ns) BOOST_TEST(g == 0);
}

BOOST_AUTO_TEST_SUITE_END()
