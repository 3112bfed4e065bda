// The exact DataLoader setting a remedy proposes, where it is written, and
// the settings (`stallscope run --set`) that try it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "remedy.hpp"

namespace stallscope::analyzer {

namespace {

// "path/to/train.py:42" -> "train.py:42" (the contract matches a path suffix).
std::string short_site(const std::string& site) {
  const size_t slash = site.find_last_of('/');
  return slash == std::string::npos ? site : site.substr(slash + 1);
}

std::string shell_quote(const std::string& a) {
  const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("_./:=@%+,-").find(ch) != std::string_view::npos;
  });
  if (plain) return a;
  std::string out = "'";
  for (char ch : a) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// A site "file:line" as `stallscope run --set` and the hooks take it inside
// a selector's brackets: a ';' would end the item, a '=' its key, a ']' the
// selector, and a control character would not survive a terminal or a log.
bool site_selector_ok(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string line = s.substr(colon + 1);  // 1 to 9 digits, not 0
  const auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  if (line.empty() || line.size() > 9 || !std::all_of(line.begin(), line.end(), digit) ||
      std::atol(line.c_str()) <= 0)
    return false;
  return std::none_of(s.begin(), s.end(), [](char ch) {
    const auto u = static_cast<unsigned char>(ch);
    return u < 0x20 || u == 0x7f || ch == ';' || ch == '=' || ch == ']';
  });
}

bool identifier(const std::string& s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char ch) {
           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
         });
}

// The selector of `l` in a --set key, "[train.py:42]": its construction
// site, else its dataset class, else none when it is the rank's only
// DataLoader. nullopt: no selector `run` accepts picks it alone (the hooks
// record no construction order, so [N] is not known here).
std::optional<std::string> dataloader_selector(const RemedyContext& c, const DataLoaderReport& l) {
  const std::string site = short_site(l.site);
  if (site_selector_ok(site)) return "[" + site + "]";
  if (identifier(l.dataset)) return "[" + l.dataset + "]";
  if (c.r.dataloaders.size() <= 1) return "";
  return std::nullopt;
}

}  // namespace

std::string dataloader_knob(const DataLoaderReport& l, const std::vector<LoaderSetting>& s) {
  std::string out = "DataLoader(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += ", ";
    out.append(s[i].field).append("=").append(s[i].value);
  }
  out += ")";
  if (!l.site.empty()) out.append(" at ").append(l.site);
  return out;
}

std::vector<Setting> dataloader_settings(const RemedyContext& c, const DataLoaderReport& l,
                                         const std::vector<LoaderSetting>& s) {
  const std::optional<std::string> picked = dataloader_selector(c, l);
  if (!picked) return {};
  std::vector<Setting> out;
  for (const auto& x : s) {
    // The contract's values: booleans lower-case.
    const std::string v = x.value == "True" ? "true" : x.value == "False" ? "false" : x.value;
    out.push_back({"dataloader" + *picked, x.field, v});
  }
  return out;
}

std::vector<Setting> loader_settings(const RemedyContext& c, const std::vector<LoaderSetting>& s) {
  // Only stallscope's loader takes loader.* settings: a run without its
  // configuration (a user's own multiprocessing pipeline) gets none.
  if (c.p.workers <= 0) return {};
  std::vector<Setting> out;
  for (const auto& x : s) out.push_back({"loader", x.field, x.value});
  return out;
}

std::string setting_item(const Setting& s) { return s.target + "." + s.key + "=" + s.value; }

std::string try_command(const std::vector<Setting>& settings, const std::vector<std::string>& command) {
  if (settings.empty()) return "";
  std::string out = "stallscope run";
  for (const Setting& s : settings) out.append(" --set ").append(shell_quote(setting_item(s)));
  out += " --";
  if (command.empty()) return out.append(" <your command>");
  for (const auto& a : command) out.append(" ").append(shell_quote(a));
  return out;
}

namespace {
double waits_ms(const LoaderWaitSplit& w) {
  return w.storage_ms + w.preprocess_ms + w.collate_ms + w.worker_wait_ms + w.handoff_ms +
         w.head_of_line_ms + w.unjoined_ms;
}
}  // namespace

double fetch_share(const DataLoaderReport& l) {
  const LoaderWaitSplit& w = l.split;
  const double all = waits_ms(w);
  return all > 0 ? (w.storage_ms + w.preprocess_ms + w.collate_ms + w.worker_wait_ms) / all : 0;
}

double producer_share(const DataLoaderReport& l) {
  const LoaderWaitSplit& w = l.split;
  const double fetch = w.storage_ms + w.preprocess_ms + w.collate_ms + w.worker_wait_ms;
  const double all = fetch + w.unjoined_ms;
  return all > 0 ? fetch / all : 1.0;
}

double transform_share(const DataLoaderReport& l) {
  const LoaderWaitSplit& w = l.split;
  const double all = waits_ms(w) - w.handoff_ms - w.head_of_line_ms;
  return all > 0 ? (w.preprocess_ms + w.collate_ms) / all : 0;
}

EpochStarts epoch_starts(const DataLoaderReport& l) {
  EpochStarts e;
  std::vector<const LoaderEpoch*> v;
  for (const auto& ep : l.epochs) v.push_back(&ep);
  std::sort(v.begin(), v.end(),
            [](const LoaderEpoch* a, const LoaderEpoch* b) { return a->generation < b->generation; });
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i]->workers_started && v[i]->startup_ms > 0) e.startup_ms += v[i]->startup_ms;
    if (i == 0 || v[i]->first_wait_ms < 0) continue;
    ++e.later;
    e.later_wait_ms += v[i]->first_wait_ms;
    if (!v[i]->workers_started) continue;
    ++e.restarts;
    e.restart_wait_ms += v[i]->first_wait_ms;
  }
  return e;
}

namespace {
// Workers busy per item on CPU and blocked (Little's law counts both): a
// worker that mostly waits on storage uses a fraction of a CPU, so the
// idle CPUs cap the CPU the workers need (N × on-CPU per item / time per
// item), not their number. Its share is the sampler's process CPU over
// its fetch time, and no less than the fetch time outside reads (time not
// on CPU there may be waiting for one).
void storage_workers(const DataLoaderReport& l, WorkersPlan& p) {
  p.storage_share = l.fetch_storage_share;
  if (l.fetch_storage_share < 0 || !mostly_in_storage(l.fetch_storage_share, 1.0)) return;
  p.storage_bound = true;
  p.cpu_per_worker = std::clamp(std::max(l.fetch_cpu_share, 1 - l.fetch_storage_share), 0.02, 1.0);
  if (p.idle >= 0) p.usable_cpus = p.idle + p.current * p.cpu_per_worker;
}
}  // namespace

std::optional<WorkersPlan> dataloader_workers(const RemedyContext& c, const DataLoaderReport& l) {
  if (l.fetch_ms <= 0) return std::nullopt;
  WorkersPlan p;
  p.current = static_cast<int>(l.num_workers);
  p.fetch_ms = l.fetch_ms;
  p.consume_ms = l.consume_ms > 0 ? l.consume_ms : c.step_ms - c.data_ms();
  if (p.consume_ms <= 0) return std::nullopt;
  p.needed = std::max(1, static_cast<int>(std::ceil(p.fetch_ms / p.consume_ms - 1e-9)));
  // Idle CPUs of the affinity set; where the rank's budget is less than
  // that set (other ranks of the node, a cgroup quota), no more than the
  // budget leaves. (Without such a share the run's mean use would only
  // hide idle stalls behind a busy start-up, as spawned workers' imports.)
  p.idle = c.r.cpu.idle_during_stalls;
  const CpuBudget& cpu = c.r.cpu;
  // The idle counter is a level over each sampler period (10 ms): waits
  // not much longer than that read as a mix of the wait and the trainer's
  // work around it, when the CPUs were busier. During a wait the rank runs
  // only its fetching workers (the trainer itself with num_workers=0); what
  // other processes take is the steps' busy CPUs beyond the rank's own use.
  // The idle CPUs during the waits are at least the rest.
  if (p.idle >= 0 && cpu.known && cpu.idle_in_steps >= 0 && cpu.used_cores > 0) {
    const double others = std::max(0.0, cpu.affinity_cpus - cpu.idle_in_steps - cpu.used_cores);
    const double fetching = std::max(1.0, double(l.num_workers));
    p.idle = std::max(p.idle, cpu.affinity_cpus - others - fetching);
  }
  if (p.idle >= 0 && cpu.known && cpu.used_cores > 0 && cpu.budget_cores < cpu.affinity_cpus)
    p.idle = std::max(0.0, std::min(p.idle, cpu.budget_cores - cpu.used_cores));
  storage_workers(l, p);
  // Half an idle CPU or more counts as one more worker's worth (of a
  // worker that mostly waits on storage, a fraction of a CPU); with no
  // workers, the trainer's own share of the fetch moves to the first one.
  int extra = p.idle >= 0 ? static_cast<int>(std::floor(p.idle / p.cpu_per_worker + 0.5)) : 1;
  if (p.current == 0) extra = std::max(extra, 1);
  p.proposed = std::min(p.needed, p.current + extra);
  p.capped = p.proposed < p.needed;
  if (p.proposed <= p.current) return std::nullopt;
  if (p.storage_bound) p.cpu_needed = p.proposed * p.cpu_per_worker;
  const double steps = double(std::max<size_t>(c.r.steps.size(), 1));
  const double per_step = l.waits_in_steps > 0 ? double(l.waits_in_steps) / steps : 1.0;
  // Waits before a batch's fetch began (workers starting: spawn imports,
  // every epoch without persistent workers) stay: more workers start as slowly.
  const double all = l.wait_ms > 0 ? l.wait_ms : 1;
  const double kept = std::clamp(l.split.worker_wait_ms / all, 0.0, 1.0);
  p.predicted_step_ms = c.step_ms - c.data_ms() * (1 - kept) +
                        per_step * std::max(0.0, p.fetch_ms / p.proposed - p.consume_ms);
  // More workers spread the same CPU work, they do not shrink it: a step
  // takes at least the CPU time the rank's processes spent per step, spread
  // over the cores the workers and the trainer can use.
  if (cpu.known && cpu.used_cores > 0 && cpu.budget_cores > 0) {
    const double cores = std::min(cpu.budget_cores, double(p.proposed) + 1);
    p.cpu_floor_ms = cpu.used_cores * c.step_ms / cores;
    p.predicted_step_ms = std::max(p.predicted_step_ms, p.cpu_floor_ms);
  }
  return p;
}

}  // namespace stallscope::analyzer
