// Guard rails before proposing more DataLoader workers (issue #25): what
// besides CPUs runs out when workers are added. Each rail reads the hooks'
// facts (DataLoaderReport's guard fields) and gives the most workers it
// allows; an unknown fact limits nothing (the evidence lists what was known).
#include <algorithm>
#include <cmath>

#include "remedy.hpp"

namespace stallscope::analyzer {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
// /dev/shm holds, besides the workers' batches in flight (num_workers ×
// prefetch_factor), the trainer's current batch and the one before it
// (alive until the loop rebinds its variables); each tensor's storage takes
// whole pages.
constexpr double kHeldBatches = 2, kPage = 4096;
// Descriptors the trainer holds per worker besides its batches (the index
// queue's pipe, the worker's sentinel, the data queue's share), and those
// it keeps for itself beyond what was open at the iterator's creation.
constexpr double kFdsPerWorker = 4, kFdSlack = 16;
// Threads a worker starts for its batches whatever it computes: its data
// queue's feeder and multiprocessing's resource sharer (sending tensors'
// descriptors). More are pools (BLAS, OpenMP, OpenCV) or the program's own.
// Without the count at its start, its main thread counts too.
constexpr double kQueueThreads = 2;

// The compute pool of a worker: torch's intra-op threads, or the threads it
// started beyond its queues', whichever is more. torch.set_num_threads(T)
// (torch 1.13, OpenMP backend) leaves T - 1 threads idle besides its
// OpenMP team of T: the pthreadpool of its QNNPACK/XNNPACK kernels, made
// at the call. Measured in a DataLoader worker whose worker_init_fn set 4:
// 9 threads = the main one + the queue's 2 + the pthreadpool's 3 + OpenMP's
// 3 (woken by the first parallel op), a pool of 4, not 9 - 1 - 2 = 6.
double worker_pool(const DataLoaderReport& l) {
  const double torch_idle = std::max(0.0, l.worker_torch_threads - 1);
  const double started = l.worker_new_threads >= 0 ? l.worker_new_threads
                                                   : l.worker_threads - 1;
  return std::max(l.worker_torch_threads, started - kQueueThreads - torch_idle);
}

std::string bytes_text(double b) {
  if (b >= kGiB) return strf("%.1f GiB", b / kGiB);
  if (b >= 1024.0 * 1024) return strf("%.1f MiB", b / 1024 / 1024);
  return strf("%.0f KiB", b / 1024);
}

struct Rail {
  int most = WorkerGuard::kNoLimit;
  std::string name, why, fix;
};

double prefetch(const DataLoaderReport& l) { return l.prefetch_factor > 0 ? l.prefetch_factor : 2; }

Rail shared_memory(const DataLoaderReport& l, int proposed, std::vector<Number>& in) {
  Rail r;
  if (l.shm_free_bytes < 0 || l.batch_bytes <= 0) return r;
  const double batch = l.batch_bytes + std::max(l.batch_tensors, 1.0) * kPage;
  const auto need = [&](int w) { return (w * prefetch(l) + kHeldBatches) * batch; };
  in.push_back({"shm_free_bytes", l.shm_free_bytes, "B"});
  in.push_back({"batch_bytes", l.batch_bytes, "B"});
  r.most = int(std::floor((l.shm_free_bytes / batch - kHeldBatches) / prefetch(l)));
  r.name = "shared memory";
  r.why = strf("/dev/shm has %s free and %d workers need %s: (%d x prefetch_factor %.0f + %.0f held "
               "by the trainer) batches of %s (too little ends in \"DataLoader worker killed by "
               "signal: Bus error\")",
               bytes_text(l.shm_free_bytes).c_str(), proposed, bytes_text(need(proposed)).c_str(),
               proposed, prefetch(l), kHeldBatches, bytes_text(batch).c_str());
  const int gib = std::max(1, int(std::ceil(1.5 * need(proposed) / kGiB)));
  r.fix = strf("raise /dev/shm to %d GiB or more: docker run --shm-size=%dg (Kubernetes: an "
               "emptyDir of medium Memory mounted at /dev/shm)", gib, gib);
  return r;
}

// With the file_descriptor strategy a worker holds a descriptor per tensor
// of each batch it has made and not yet handed over — its own and the
// resource sharer's duplicate — and each worker process has the trainer's
// limit and inherits its open descriptors. Measured with torch 1.13 (40 and
// 80 tensors per batch, prefetch_factor 2): a worker that runs ahead of the
// trainer (its queue full: what more workers do) needs up to (2 x
// prefetch_factor + 1) x tensors + what it inherited; one the trainer waits
// for, (prefetch_factor + 1) x tensors. The trainer itself holds a few per
// worker (its queues' pipes, the sentinel).
Rail descriptors(const DataLoaderReport& l, int proposed, std::vector<Number>& in) {
  Rail r;
  if (l.sharing_strategy != "file_descriptor" || l.nofile_soft <= 0 || l.batch_tensors <= 0) return r;
  const double open = std::max(l.open_fds, 0.0);
  const double worker = open + (2 * prefetch(l) + 1) * l.batch_tensors + kFdSlack;
  in.push_back({"nofile_soft", l.nofile_soft, ""});
  in.push_back({"open_fds", open, ""});
  in.push_back({"batch_tensors", l.batch_tensors, ""});
  r.name = "descriptors";
  if (worker > l.nofile_soft) {
    r.most = int(l.num_workers);  // the workers run ahead only once there are more of them
    r.why = strf("RLIMIT_NOFILE is %.0f, and a worker that runs ahead of the trainer holds up to "
                 "(2 x prefetch_factor %.0f + 1) x %.0f tensors + the %.0f descriptors it "
                 "inherits = %.0f (too few ends in \"Too many open files\" or \"received 0 items "
                 "of ancdata\")",
                 l.nofile_soft, prefetch(l), l.batch_tensors, open, worker - kFdSlack);
  } else {
    r.most = int(std::floor(std::max(0.0, l.nofile_soft - open - kFdSlack) / kFdsPerWorker));
    r.why = strf("RLIMIT_NOFILE is %.0f with %.0f open in the trainer, which holds %.0f more per "
                 "worker", l.nofile_soft, open, kFdsPerWorker);
  }
  const double want = std::max(65536.0, std::ceil(2 * std::max(worker, open + proposed * kFdsPerWorker)));
  r.fix = strf("ulimit -n %.0f before starting the job, or "
               "torch.multiprocessing.set_sharing_strategy('file_system')", want);
  return r;
}

Rail threads(const RemedyContext& c, const DataLoaderReport& l, int proposed, std::vector<Number>& in) {
  Rail r;
  if (l.worker_threads < 0 && l.worker_torch_threads < 0) return r;
  in.push_back({"worker_threads", l.worker_threads, ""});
  in.push_back({"worker_torch_threads", l.worker_torch_threads, ""});
  in.push_back({"worker_new_threads", l.worker_new_threads, ""});
  const double pool = worker_pool(l);
  const double budget = c.r.cpu.known ? c.r.cpu.budget_cores : 0;
  if (pool <= 1 || budget <= 0) return r;
  r.most = int(std::floor(budget / pool));
  r.name = "threads";
  r.why = strf("each worker runs a pool of %.0f threads (%.0f threads in all, "
               "torch.get_num_threads() %.0f there), so %d workers run %.0f compute threads on the "
               "rank's %.1f-core budget",
               pool, l.worker_threads, l.worker_torch_threads, proposed, proposed * pool, budget);
  if (l.worker_torch_threads > 1)
    r.fix = "one thread per worker: torch.set_num_threads(1) (and cv2.setNumThreads(0)) in "
            "worker_init_fn, or OMP_NUM_THREADS=1";
  else  // torch's is 1 there: the pool is another library's or the dataset's own
    r.fix = "one thread per worker for the pool's library: cv2.setNumThreads(0) in "
            "worker_init_fn, OMP_NUM_THREADS=1 / OPENBLAS_NUM_THREADS=1, or the dataset's own "
            "thread pool of 1";
  return r;
}

}  // namespace

WorkerGuard worker_guard(const RemedyContext& c, const DataLoaderReport& l, int proposed) {
  WorkerGuard g;
  for (Rail r : {shared_memory(l, proposed, g.inputs), descriptors(l, proposed, g.inputs),
                 threads(c, l, proposed, g.inputs)}) {
    if (r.most >= proposed || r.most >= g.most) continue;
    g.most = std::max(0, r.most);
    g.rail = r.name;
    g.why = r.why;
    g.fix = r.fix;
  }
  return g;
}

WorkersPlan workers_at(const RemedyContext& c, const DataLoaderReport& l, WorkersPlan p, int n) {
  // dataloader_workers()'s prediction at n workers.
  p.proposed = n;
  p.capped = true;
  const double steps = double(std::max<size_t>(c.r.steps.size(), 1));
  const double per_step = l.waits_in_steps > 0 ? double(l.waits_in_steps) / steps : 1.0;
  const double all = l.wait_ms > 0 ? l.wait_ms : 1;
  const double kept = std::clamp(l.split.worker_wait_ms / all, 0.0, 1.0);
  p.predicted_step_ms = c.step_ms - c.data_ms() * (1 - kept) +
                        per_step * std::max(0.0, p.fetch_ms / n - p.consume_ms);
  const CpuBudget& cpu = c.r.cpu;
  p.cpu_floor_ms = 0;
  if (cpu.known && cpu.used_cores > 0 && cpu.budget_cores > 0) {
    p.cpu_floor_ms = cpu.used_cores * c.step_ms / std::min(cpu.budget_cores, double(n) + 1);
    p.predicted_step_ms = std::max(p.predicted_step_ms, p.cpu_floor_ms);
  }
  return p;
}

}  // namespace stallscope::analyzer
