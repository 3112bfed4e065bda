#include "facts.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>
#include <stallscope/loader/probe.hpp>
#include <stallscope/loader/tier.hpp>
#include <stallscope/trace.hpp>

namespace trainer {

using nlohmann::json;

uint64_t mean_decoded_bytes(const std::string& dir) {
  std::ifstream f(dir + "/dataset.json");
  const json j = json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("samples") || j["samples"].get<double>() <= 0) return 65536;
  return static_cast<uint64_t>(j["decoded_bytes"].get<double>() / j["samples"].get<double>());
}

namespace {

json probe_points(const stallscope::loader::ProbeReport& r) {
  json pts = json::array();
  for (const auto& rate : r.rates)
    if (rate.reads > 0 && rate.seconds > 0)
      pts.push_back({{"queue_depth", rate.queue_depth},
                     {"read_bytes", static_cast<double>(rate.bytes) / rate.reads},
                     {"bytes_per_s", rate.bytes / rate.seconds}});
  return pts;
}

void run_probe(const Options& o, const stallscope::loader::Dataset& ds, bool say) {
  stallscope::loader::ProbeReport r;
  if (stallscope::loader::run_storage_probe(ds, o.loader.backend, o.loader.read_size, 0.5,
                                            stallscope::loader::real_sys(), &r) != 0)
    return;
  stallscope::attach("loader.probe", r.json());
  const json sp = {{"tier", std::string(stallscope::loader::tier_name(r.tier.tier))},
                   {"points", probe_points(r)}};
  stallscope::attach("storage_probe", sp.dump());
  if (!say) return;
  std::fprintf(stderr, "trainer: storage probe (%s, %s):", std::string(r.tier.fs).c_str(),
               r.direct ? "O_DIRECT" : "buffered");
  for (const auto& rate : r.rates) std::fprintf(stderr, " QD%u %.0f MB/s", rate.queue_depth, rate.mb_per_s());
  std::fputc('\n', stderr);
}

}  // namespace

void record_facts(const Options& o, const stallscope::loader::Dataset& ds, const Comm&, bool say) {
  if (o.trace && o.loader.probe) run_probe(o, ds, say);
  const auto& c = o.loader;
  const json loader = {{"workers", c.workers},       {"prefetch_batches", c.prefetch_batches},
                       {"queue_depth", c.queue_depth}, {"read_size", c.read_size},
                       {"batch_size", c.batch_size},   {"pinned", c.pinned}};
  stallscope::attach("loader", loader.dump());
}

void attach_device_model(const Options& o, const EmulatedDevice& dev, std::string_view copy_device) {
  const json model = {{"kind", "emulated"},
                      {"copy_device", std::string(copy_device)},
                      {"pinned_gbps", o.loader.pinned_gbps},
                      {"pageable_gbps", o.loader.pageable_gbps},
                      {"compute", json::parse(dev.model_json())}};
  stallscope::attach("emulated_device", model.dump());
  const json cfg = {{"steps", o.steps},         {"compute_ms", o.compute_ms}, {"update_ms", o.update_ms},
                    {"grad_mb", o.grad_mb},     {"bus_gbps", o.bus_gbps},     {"overlap_comm", o.overlap_comm},
                    {"host_ms", o.host_ms},     {"sync_each_step", o.sync_each_step},
                    {"tiny_kernels", o.tiny_kernels}, {"launch_us", o.launch_us},
                    {"decode_us", o.decode_us}, {"sample_bytes", o.sample_bytes}};
  stallscope::attach("trainer.config", cfg.dump());
}

RunSummary summarize(const StepTimes& t) {
  RunSummary s;
  if (t.step_ms.empty()) return s;
  s.warmup = std::min<uint64_t>(t.step_ms.size() - 1, std::max<uint64_t>(3, t.step_ms.size() / 10));
  std::vector<double> v(t.step_ms.begin() + static_cast<long>(s.warmup), t.step_ms.end());
  s.mean_ms = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  s.p50_ms = v[v.size() / 2];
  const double per_step = t.step_ms.empty() ? 0 : static_cast<double>(t.samples) / t.step_ms.size();
  s.samples_per_s = s.mean_ms > 0 ? per_step / (s.mean_ms / 1e3) : 0;
  return s;
}

void write_summary(const std::string& path, const Options& o, const StepTimes& t, const RunSummary& s) {
  const json j = {{"steps", t.step_ms.size()}, {"warmup", s.warmup},           {"p50_ms", s.p50_ms},
                  {"mean_ms", s.mean_ms},      {"samples_per_s", s.samples_per_s}, {"wall_s", t.wall_s},
                  {"samples", t.samples},      {"step_ms", t.step_ms},        {"traced", o.trace}};
  std::ofstream(path) << j.dump() << "\n";
}

}  // namespace trainer
