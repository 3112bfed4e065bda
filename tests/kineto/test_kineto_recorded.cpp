// Traces recorded by torch.profiler on the CPU with Debian's python3-torch
// (tests/kineto/record_cpu_trace.py; committed in tests/kineto/data). The
// expected data-wait share is computed here independently, with another
// JSON parser (nlohmann) over the same file.
#include <zlib.h>

#include <filesystem>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "kineto/kineto.hpp"

using namespace stallscope;
using analyzer::Part;
namespace kin = analyzer::kineto;

namespace {

const std::string kData = STALLSCOPE_KINETO_DATA;

std::string gunzip(const std::string& path) {
  gzFile g = gzopen(path.c_str(), "rb");
  BOOST_REQUIRE(g != nullptr);
  std::string out;
  char buf[65536];
  int n = 0;
  while ((n = gzread(g, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(g);
  return out;
}

struct Expected {
  size_t steps = 0;
  // Per ProfilerStep, in start order: its wall time, the DataLoader waits
  // in it, and the time inside operators outside those waits.
  std::vector<double> step_ms, wait_ms, op_ms;
};

using Spans = std::vector<std::pair<double, double>>;

Spans merged(Spans v) {
  std::sort(v.begin(), v.end());
  Spans out;
  for (const auto& x : v)
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  return out;
}

double overlap(const Spans& v, double a, double b) {
  double n = 0;
  for (const auto& [c, d] : v) n += std::max(0.0, std::min(b, d) - std::max(a, c));
  return n;
}

// ProfilerStep#N spans and the DataLoader __next__ time inside each.
Expected expected_of(const std::string& path) {
  const auto doc = nlohmann::json::parse(gunzip(path));
  const auto& events = doc.is_array() ? doc : doc.at("traceEvents");
  Spans steps, waits, ops;
  for (const auto& e : events) {  // one thread here: the trainer's
    if (e.value("ph", "") != "X") continue;
    const std::string name = e.value("name", "");
    const double a = e.at("ts").get<double>(), b = a + e.at("dur").get<double>();
    if (name.rfind("ProfilerStep#", 0) == 0)
      steps.emplace_back(a, b);
    else if (name.rfind("enumerate(DataLoader)#", 0) == 0)
      waits.emplace_back(a, b);
    else
      ops.emplace_back(a, b);
  }
  std::sort(steps.begin(), steps.end());
  waits = merged(waits);
  ops = merged(ops);
  Expected x;
  x.steps = steps.size();
  for (const auto& [a, b] : steps) {
    const double w = overlap(waits, a, b);
    double in_ops = overlap(ops, a, b);
    for (const auto& [c, d] : waits) in_ops -= overlap(ops, std::max(a, c), std::min(b, d));
    x.step_ms.push_back((b - a) / 1000);
    x.wait_ms.push_back(w / 1000);
    x.op_ms.push_back(in_ops / 1000);
  }
  return x;
}

double share_of_steady(const analyzer::RankReport& r, const std::vector<double>& v,
                       const Expected& x) {
  double part = 0, wall = 0;
  for (size_t i = r.warmup_steps; i < x.steps; ++i) {
    part += v[i];
    wall += x.step_ms[i];
  }
  return part / wall;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kineto_recorded)

BOOST_AUTO_TEST_CASE(loader_bound_cpu_trace_is_input_bound_with_the_exact_wait_share) {
  const std::string path = kData + "/cpu_loader_bound.json.gz";
  BOOST_TEST(kin::sniff(path));
  const auto imp = kin::import_file(path);
  BOOST_TEST((imp.schema == kin::Schema::kAutograd));  // Debian's torch 1.13 has no Kineto
  const Expected x = expected_of(path);
  BOOST_REQUIRE(x.steps >= 4u);
  BOOST_TEST(imp.stats.steps == x.steps);
  const auto r = analyzer::analyze_imported(imp, {});
  BOOST_TEST(r.steps.size() == x.steps);
  BOOST_TEST(r.compute_basis == "cpu_only");
  const double want = share_of_steady(r, x.wait_ms, x);
  BOOST_TEST(r.parts[analyzer::idx(Part::kDataUnknown)].share == want,
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(want > 0.4);  // workers sleep 30 ms per batch; the model takes ~1 ms
  BOOST_TEST(r.cause.find("input-bound") != std::string::npos, r.cause);
  BOOST_REQUIRE(!r.remedies.empty());
  BOOST_TEST(r.remedies[0].id == "tune_dataloader");
}

BOOST_AUTO_TEST_CASE(compute_bound_cpu_trace_is_healthy) {
  const std::string path = kData + "/cpu_compute_bound.json.gz";
  const auto imp = kin::import_file(path);
  const Expected x = expected_of(path);
  BOOST_TEST(imp.stats.steps == x.steps);
  const auto r = analyzer::analyze_imported(imp, {});
  const double wait = share_of_steady(r, x.wait_ms, x);
  BOOST_TEST(r.parts[analyzer::idx(Part::kDataUnknown)].share == wait,
             boost::test_tools::tolerance(1e-6));
  // A CPU-only trainer: compute is the time inside its operators, the gaps
  // between them (Python, the profiler) host on-CPU; no "host-bound 100 %".
  const double ops = share_of_steady(r, x.op_ms, x);
  BOOST_TEST(r.parts[analyzer::idx(Part::kCompute)].share == ops,
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r.parts[analyzer::idx(Part::kHostCpu)].share == 1 - wait - ops,
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(ops > 0.9);
  BOOST_TEST(r.parts[analyzer::idx(Part::kHostCpu)].share > 0.0);
  BOOST_TEST(r.cause.find("compute-bound") != std::string::npos, r.cause);
  BOOST_TEST(!r.remedies.empty());
  BOOST_TEST(r.remedies[0].id == "healthy");
}

BOOST_AUTO_TEST_CASE(the_data_directory_reports_as_two_ranks) {
  const auto rep = analyzer::analyze_paths({kData}, {});
  BOOST_TEST(rep.errors.empty());
  BOOST_TEST(rep.ranks.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
