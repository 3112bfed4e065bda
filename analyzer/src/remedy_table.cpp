// The remedy catalog. Adding a remedy: one new file in src/remedies/, its
// declaration in remedy.hpp, and one line here.
#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "remedy.hpp"

namespace stallscope::analyzer {

namespace {

// One row per RemedyId, in its order: the published key, the family.
struct CatalogRow {
  RemedyId id;
  std::string_view key;
  RemedyFamily family;
};
using F = RemedyFamily;
constexpr CatalogRow kCatalog[] = {
    {RemedyId::kRaisePrefetch, "raise_prefetch", F::kInput},
    {RemedyId::kRaiseQueueDepth, "raise_queue_depth", F::kInput},
    {RemedyId::kDirectIo, "direct_io", F::kInput},
    {RemedyId::kLocalCopy, "local_copy", F::kInput},
    {RemedyId::kPackShards, "pack_shards", F::kInput},
    {RemedyId::kMoreWorkers, "more_workers", F::kInput},
    {RemedyId::kCacheDecoded, "cache_decoded", F::kInput},
    {RemedyId::kPinnedMemory, "pinned_memory", F::kCopy},
    {RemedyId::kH2dBelowLink, "h2d_below_link", F::kCopy},
    {RemedyId::kNumaWorkers, "numa_workers", F::kInput},
    {RemedyId::kOverlapCopies, "overlap_copies", F::kCopy},
    {RemedyId::kOverlapComm, "overlap_comm", F::kComm},
    {RemedyId::kCollectivesBelowLink, "collectives_below_link", F::kComm},
    {RemedyId::kAvoidSync, "avoid_sync", F::kHost},
    {RemedyId::kCudaGraphs, "cuda_graphs", F::kHost},
    {RemedyId::kFusedOptimizer, "fused_optimizer", F::kHost},
    {RemedyId::kLoggingOffStep, "logging_off_step", F::kHost},
    {RemedyId::kLargerBatch, "larger_batch", F::kHost},
    {RemedyId::kTuneDataloader, "tune_dataloader", F::kInput},
    {RemedyId::kPersistentWorkers, "persistent_workers", F::kInput},
    {RemedyId::kSlowSamples, "slow_samples", F::kInput},
    {RemedyId::kFewerWorkers, "fewer_workers", F::kInput},
    {RemedyId::kSharingStrategy, "sharing_strategy", F::kInput},
    {RemedyId::kHealthy, "healthy", F::kVerdict},
};
static_assert(std::size(kCatalog) == kRemedyCount);
constexpr bool catalog_in_order() {
  for (size_t i = 0; i < std::size(kCatalog); ++i)
    if (static_cast<size_t>(kCatalog[i].id) != i) return false;
  return true;
}
static_assert(catalog_in_order(), "kCatalog lists RemedyId in its order");

}  // namespace

std::string_view remedy_key(RemedyId id) { return kCatalog[static_cast<size_t>(id)].key; }
RemedyFamily remedy_family(RemedyId id) { return kCatalog[static_cast<size_t>(id)].family; }

std::span<const RemedyRule* const> remedy_table() {
  static const std::array<const RemedyRule*, kRemedyCount> kTable = {
      &raise_prefetch_rule(),  &raise_queue_depth_rule(), &direct_io_rule(),
      &local_copy_rule(),      &pack_shards_rule(),       &more_workers_rule(),
      &cache_decoded_rule(),   &pinned_memory_rule(),     &h2d_below_link_rule(),
      &numa_workers_rule(),    &overlap_copies_rule(),    &overlap_comm_rule(),
      &collectives_below_link_rule(), &avoid_sync_rule(), &cuda_graphs_rule(),
      &fused_optimizer_rule(),        &logging_off_step_rule(), &larger_batch_rule(),
      &tune_dataloader_rule(),        &persistent_workers_rule(), &slow_samples_rule(),
      &fewer_workers_rule(),          &sharing_strategy_rule(),
      &healthy_rule(),
  };
  return kTable;
}

std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string gap_top_text(const GapClassStat& a, const GapClassStat* b) {
  std::vector<GapActivity> v = a.top;
  if (b != nullptr) v.insert(v.end(), b->top.begin(), b->top.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const GapActivity& x, const GapActivity& y) { return x.ms > y.ms; });
  std::string s;
  for (size_t i = 0; i < v.size() && i < 3; ++i)
    s += (i == 0 ? "; top: " : ", ") + v[i].name + strf(" %.2f ms", v[i].ms);
  return s;
}

Remedy make_remedy(const RemedyContext& c, RemedyId id, std::string title,
                   std::string loader_knob, std::string pytorch_knob) {
  Remedy m;
  m.kind = id;
  m.id = remedy_key(id);
  m.title = std::move(title);
  m.loader_knob = std::move(loader_knob);
  m.pytorch_knob = std::move(pytorch_knob);
  m.step_ms = c.step_ms;
  m.predicted_step_ms = c.step_ms;
  m.inputs_from = "run";
  return m;
}

Remedy reject(RemedyId id, std::string title, std::string reason) {
  Remedy m;
  m.kind = id;
  m.id = remedy_key(id);
  m.title = std::move(title);
  m.rejected = reason.empty() ? "not proposed" : std::move(reason);
  return m;
}

std::vector<Remedy> propose_remedies(const RemedyContext& c, size_t max,
                                     std::vector<RejectedRemedy>* rejected) {
  std::vector<Remedy> out;
  std::vector<RejectedRemedy> no;
  if (c.r.steady_steps == 0) return out;
  for (const RemedyRule* rule : remedy_table()) {
    auto m = rule->evaluate(c);
    if (!m) continue;
    if (!m->rejected.empty()) {
      no.push_back({m->kind, m->id, m->title, m->rejected});
      continue;
    }
    m->predicted_step_ms = std::clamp(m->predicted_step_ms, 0.0, c.step_ms);
    out.push_back(std::move(*m));
  }
  if (rejected != nullptr) {
    // A remedy proposed by one path (producers, our loader) is not also "not proposed".
    std::erase_if(no, [&](const RejectedRemedy& x) {
      return std::any_of(out.begin(), out.end(), [&](const Remedy& m) { return m.kind == x.kind; });
    });
    *rejected = std::move(no);
  }
  order_remedies(out);
  if (out.size() > max) out.resize(max);
  return out;
}

std::string cpu_whose(const CpuBudget& cpu) {
  std::string s = strf("this rank's processes used %.1f of its %.1f-core budget", cpu.used_cores,
                       cpu.budget_cores);
  if (cpu.idle_during_stalls >= 0) {
    s += strf(", %.1f CPUs of its affinity set were idle during stalls", cpu.idle_during_stalls);
    // What the rank itself did not use went to other processes: other ranks
    // of the node where it shares them, other programs otherwise.
    const double others = cpu.affinity_cpus - cpu.idle_during_stalls - cpu.used_cores;
    if (cpu.idle_during_stalls < 1 && cpu.affinity_cpus > 0 && others >= 0.1 &&
        cpu.ranks_on_node > 1 && cpu.other_ranks_cores >= 0)
      s += strf(" (%.1f CPUs busy with other processes: %.1f the node's %d other rank(s), %.1f "
                "other programs)",
                others, std::min(others, cpu.other_ranks_cores), cpu.ranks_on_node - 1,
                std::max(0.0, others - cpu.other_ranks_cores));
    else if (cpu.idle_during_stalls < 1 && cpu.affinity_cpus > 0 && others >= 0.1)
      s += strf(" (%.1f CPUs busy with other processes or ranks: %s)", others,
                cpu.ranks_on_node > 1 ? strf("the node's %d other rank(s) and other programs",
                                             cpu.ranks_on_node - 1).c_str()
                                      : "other programs");
    else if (cpu.idle_during_stalls < 1 && cpu.used_cores < 0.9 * cpu.budget_cores)
      s += " (the rest busy with other processes or ranks)";
    else if (cpu.idle_during_stalls < 1)
      s += " (busy with this rank's own workers and trainer)";
  }
  if (cpu.throttled_periods > 0)
    s += strf(", cgroup throttled %.0f periods", cpu.throttled_periods);
  return s;
}

void attribute_node_cpu(Report& rep) {
  std::map<std::string, std::vector<RankReport*>> by_host;
  for (auto& r : rep.ranks)
    if (r.cpu.known) by_host[r.host].push_back(&r);
  for (auto& [host, ranks] : by_host) {
    if (ranks.size() < 2) continue;
    double all = 0;
    for (const RankReport* r : ranks) all += r->cpu.used_cores;
    for (RankReport* r : ranks) {
      // Only where every rank of the node is here: else "ranks and programs" stays.
      if (int(ranks.size()) != r->cpu.ranks_on_node) continue;
      const std::string before = cpu_whose(r->cpu);
      r->cpu.other_ranks_cores = all - r->cpu.used_cores;
      const std::string after = cpu_whose(r->cpu);
      if (after == before) continue;
      // The rules wrote cpu_whose's words into their evidence and reasons
      // while the rank was analysed alone: the same words, now split.
      auto swap = [&](std::string& s) {
        for (size_t at = s.find(before); at != std::string::npos; at = s.find(before, at + after.size()))
          s.replace(at, before.size(), after);
      };
      for (auto& m : r->remedies) swap(m.evidence);
      for (auto& x : r->rejected_remedies) swap(x.reason);
    }
  }
}

double order_gain_ms(const Remedy& m) {
  const double g = m.gain_ms();
  return m.bound && g > 0 ? kBoundOrderWeight * g : g;
}

void order_remedies(std::vector<Remedy>& v) {
  std::stable_sort(v.begin(), v.end(), [](const Remedy& a, const Remedy& b) {
    const bool ha = a.kind == RemedyId::kHealthy, hb = b.kind == RemedyId::kHealthy;
    if (ha != hb) return ha;
    return order_gain_ms(a) > order_gain_ms(b);
  });
}

}  // namespace stallscope::analyzer
