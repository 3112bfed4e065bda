// Data producers on the wrong NUMA node: the rank's processes (the trainer
// and its data workers) may run only on CPUs of another NUMA node than the
// GPU they feed. Batches are then built in the far socket's memory, and
// every host-to-device copy, pinned staging included, crosses the
// inter-socket link. The GPU comes from the "cuda.device" attachments
// matched to the topology by UUID (probes.cpp), the CPUs from each
// process's recorded affinity.
#include <algorithm>

#include "probes.hpp"
#include "remedy.hpp"
#include "stallscope/internal/proc_text.hpp"

namespace stallscope::analyzer {
namespace {

// Assumed, not measured: copies from the far socket's memory reach about
// three quarters of the near socket's rate on two-socket servers, and
// preprocessing that reads and writes far memory loses about a tenth.
constexpr double kRemoteCopyLoss = 0.25;
constexpr double kRemotePreprocessLoss = 0.10;

class NumaWorkers final : public RemedyRule {
 public:
  RemedyId id() const override { return RemedyId::kNumaWorkers; }
  std::optional<Remedy> evaluate(const RemedyContext& c) const override {
    const GpuLink* gpu = rank_gpu(c.p);
    if (gpu == nullptr || gpu->numa < 0 || c.p.host_numa_nodes < 2 || c.procs.empty())
      return std::nullopt;
    const std::vector<int> local = sys::parse_cpu_list(gpu->cpus);
    std::vector<int> allowed;
    for (const auto& p : c.procs) {
      const std::vector<int> cpus = sys::parse_cpu_list(p.affinity);
      allowed.insert(allowed.end(), cpus.begin(), cpus.end());
    }
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    if (local.empty() || allowed.empty()) return std::nullopt;
    const auto near = std::count_if(allowed.begin(), allowed.end(), [&](int cpu) {
      return std::binary_search(local.begin(), local.end(), cpu);
    });
    const double near_share = double(near) / double(allowed.size());
    // Unpinned processes span every node: not wrong, only unpinned.
    if (near_share >= 0.5) return std::nullopt;
    const double h2d = c.ms(Part::kCopyH2D), data = c.data_ms();
    if (h2d + data < 0.1 * c.step_ms) return std::nullopt;
    Remedy m = make_remedy(
        c, RemedyId::kNumaWorkers, "Run the data workers on the GPU's NUMA node",
        strf("numactl --cpunodebind=%d --membind=%d <trainer>", gpu->numa, gpu->numa),
        strf("numactl --cpunodebind=%d --membind=%d python train.py (or os.sched_setaffinity "
             "to CPUs %s in the DataLoader's worker_init_fn)",
             gpu->numa, gpu->numa, gpu->cpus.c_str()));
    m.predicted_step_ms = c.step_ms - kRemoteCopyLoss * h2d - kRemotePreprocessLoss * data;
    m.inputs_from = "assumed";
    m.model = strf("step - %.2f * h2d_exposed - %.2f * data_stall (assumed losses of work on "
                   "the far socket's memory; measure with numactl and stallscope topo --probe)",
                   kRemoteCopyLoss, kRemotePreprocessLoss);
    m.inputs = {{"h2d_exposed_ms", h2d, "ms"},
                {"data_stall_ms", data, "ms"},
                {"gpu_numa_node", double(gpu->numa), ""},
                {"allowed_cpus_on_gpu_node", 100.0 * near_share, "%"}};
    std::string who = gpu->name.empty() ? "the GPU" : gpu->name;
    if (!gpu->bus_id.empty()) who += " (" + gpu->bus_id + ")";
    m.evidence = strf("%s is on NUMA node %d (CPUs %s); the rank's processes may run on %zu "
                      "CPUs, %.0f %% of them on that node; exposed H2D %.2f ms and data stall "
                      "%.2f ms per step",
                      who.c_str(), gpu->numa, gpu->cpus.c_str(), allowed.size(),
                      100.0 * near_share, h2d, data);
    return m;
  }
};

}  // namespace

const RemedyRule& numa_workers_rule() {
  static const NumaWorkers rule;
  return rule;
}

}  // namespace stallscope::analyzer
