#include "options.hpp"

#include <cstdlib>
#include <functional>
#include <map>

namespace trainer {

namespace {

bool to_double(const std::string& v, double* out) {
  char* end = nullptr;
  *out = std::strtod(v.c_str(), &end);
  return !v.empty() && end && *end == '\0' && *out >= 0;
}

using Setter = std::function<bool(Options&, const std::string&)>;

Setter num(double Options::*field) {
  return [field](Options& o, const std::string& v) { return to_double(v, &(o.*field)); };
}

Setter count(uint64_t Options::*field) {
  return [field](Options& o, const std::string& v) {
    double d = 0;
    if (!to_double(v, &d)) return false;
    o.*field = static_cast<uint64_t>(d);
    return true;
  };
}

const std::map<std::string, Setter>& valued() {
  static const std::map<std::string, Setter> m = {
      {"--data", [](Options& o, const std::string& v) { o.data = v; return !v.empty(); }},
      {"--rank-data", [](Options& o, const std::string& v) { o.rank_data.push_back(v); return v.find('=') != std::string::npos; }},
      {"--slow-rank", [](Options& o, const std::string& v) { o.slow.push_back(v); return v.find('=') != std::string::npos; }},
      {"--device", [](Options& o, const std::string& v) { o.device = v; return v == "cuda" || v == "emulated" || v == "auto"; }},
      {"--summary-json", [](Options& o, const std::string& v) { o.summary_json = v; return true; }},
      {"--steps", count(&Options::steps)},
      {"--sample-bytes", count(&Options::sample_bytes)},
      {"--decode-us", num(&Options::decode_us)},
      {"--compute-ms", num(&Options::compute_ms)},
      {"--update-ms", num(&Options::update_ms)},
      {"--grad-mb", num(&Options::grad_mb)},
      {"--bus-gbps", num(&Options::bus_gbps)},
      {"--host-ms", num(&Options::host_ms)},
      {"--tiny-kernels", count(&Options::tiny_kernels)},
      {"--launch-us", num(&Options::launch_us)},
  };
  return m;
}

const std::map<std::string, bool Options::*>& switches() {
  static const std::map<std::string, bool Options::*> m = {
      {"--overlap-comm", &Options::overlap_comm}, {"--sync-each-step", &Options::sync_each_step},
      {"--copy-in-step", &Options::copy_in_step},
      {"--host-sleep", &Options::host_sleep},
      {"--device-burn", &Options::device_burn},   {"--quiet", &Options::quiet}};
  return m;
}

int parse_one(std::vector<std::string>& args, size_t& i, Options* o, std::string* error) {
  std::string a = args[i], v;
  if (const size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
    v = a.substr(eq + 1);
    a = a.substr(0, eq);
  } else if (valued().count(a) && i + 1 < args.size()) {
    v = args[++i];
  }
  if (a == "--no-trace") return o->trace = false, 0;
  if (auto s = switches().find(a); s != switches().end()) return o->*(s->second) = true, 0;
  auto it = valued().find(a);
  if (it == valued().end()) return *error = "unknown flag " + a + " (see --help)", 2;
  if (!it->second(*o, v)) return *error = "bad value '" + v + "' for " + a, 2;
  return 0;
}

}  // namespace

int parse_options(int argc, char** argv, Options* o, std::string* error) {
  std::vector<std::string> args(argv + 1, argv + argc), rest;
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return 1;
  if (stallscope::loader::apply_env(o->loader, error) != 0 ||
      stallscope::loader::apply_flags(o->loader, args, error, &rest) != 0)
    return 2;
  for (size_t i = 0; i < rest.size(); ++i)
    if (const int rc = parse_one(rest, i, o, error); rc != 0) return rc;
  // A setting that cannot be applied is refused and reported, never fatal:
  // the run goes on with the program's own value.
  const char* set = std::getenv("STALLSCOPE_SET");
  if (stallscope::loader::apply_settings(o->loader, set, &o->settings) < 0) o->settings.clear();
  if (o->data.empty()) return *error = "--data DIR is required", 2;
  if (o->steps == 0) return *error = "--steps must be at least 1", 2;
  return stallscope::loader::validate(o->loader, error) != 0 ? 2 : 0;
}

std::string usage() {
  return "usage: trainer --data DIR [options] [--loader-<knob>=V ...]\n"
         "  a training loop over the stallscope loader on a CUDA GPU or the emulated device\n"
         "  --steps N            training steps (default 50; epochs repeat as needed)\n"
         "  --decode-us U        extra augment CPU per sample, us (zstd decode always runs)\n"
         "  --sample-bytes B     bytes per sample copied to the device (default: decoded size)\n"
         "  --compute-ms M       forward+backward per step (default 20)\n"
         "  --update-ms M        optimizer step (default 0.5)\n"
         "  --grad-mb MB         gradients all-reduced per step (default 0)\n"
         "  --bus-gbps G         collective bus bandwidth (default 10)\n"
         "  --overlap-comm       all-reduce buckets during backward\n"
         "  --host-ms M          host work per step (logging, metrics), CPU time burnt\n"
         "  --host-sleep         the host work blocks for M ms instead (logging to a remote\n"
         "                       store): its wall time stays M ms on a loaded machine\n"
         "  --sync-each-step     block on the device every step (like loss.item())\n"
         "  --tiny-kernels N     N more kernels per step of 10 us, each launched by a call that\n"
         "                       takes --launch-us U of host CPU (default 40): launch-bound\n"
         "  --copy-in-step       copy each batch to the device on the compute stream, so the\n"
         "                       copy never overlaps compute (.to(device) on the default\n"
         "                       stream); the loader then copies nothing\n"
         "  --slow-rank R=F      rank R's compute and host work F times slower\n"
         "  --rank-data R=DIR    rank R reads DIR instead of --data\n"
         "  --device D           cuda, emulated or auto (default: CUDA where a driver and a\n"
         "                       GPU are present, else the emulated device)\n"
         "  --device-burn        the emulated device spins instead of sleeping\n"
         "  --no-trace           capture off (overhead measurements)\n"
         "  --summary-json FILE  write step time and throughput as JSON\n"
         "  loader knobs: --loader-workers, --loader-queue-depth, --loader-prefetch-batches,\n"
         "  --loader-batch-size, --loader-read-size, --loader-pinned=on|off,\n"
         "  --loader-pinned-gbps, --loader-pageable-gbps … (docs/loader.md)\n"
         "  STALLSCOPE_SET=\"loader.workers=4;loader.prefetch=8\" (stallscope run --set) applies\n"
         "  loader.<knob> settings over these flags; each applied or refused one is said on\n"
         "  stderr and marked in the trace (docs/cli.md)\n";
}

namespace {
// The last R=V given for `rank` wins, like every other flag.
bool rank_value(const std::vector<std::string>& list, int rank, std::string* out) {
  bool found = false;
  for (const auto& s : list) {
    const size_t eq = s.find('=');
    if (std::atoi(s.substr(0, eq).c_str()) == rank) *out = s.substr(eq + 1), found = true;
  }
  return found;
}
}  // namespace

double slow_factor(const Options& o, int rank) {
  std::string v;
  double f = 1;
  return rank_value(o.slow, rank, &v) && to_double(v, &f) && f > 0 ? f : 1.0;
}

std::string data_for_rank(const Options& o, int rank) {
  std::string v;
  return rank_value(o.rank_data, rank, &v) ? v : o.data;
}

}  // namespace trainer
