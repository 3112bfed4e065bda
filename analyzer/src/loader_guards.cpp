// The DataLoader hooks' guard-rail marks (docs/report-guide.md
// "DataLoader"): what limits more workers beside CPUs — free shared memory
// for the batches in flight, the descriptor limit, the threads in a worker.
//   dataloader env loader=ID shm_free=B shm_total=B nofile=N fds=N sharing=S
//   dataloader batch loader=ID bytes=B tensors=N
//   dataloader worker threads=N base=N torch_threads=N
// Values are decimal; a missing or malformed one stays unknown.
#include <charconv>
#include <string_view>

#include "loader_model.hpp"

namespace stallscope::analyzer {

namespace {
constexpr size_t kMaxGuardLoaders = 256, kMaxWorkerPids = 4096;

// The value of `key=` among the mark's words ("" none).
std::string_view word(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t sp = text.find(' ', at);
    const std::string_view w = text.substr(at, sp == std::string_view::npos ? sp : sp - at);
    if (w.size() > key.size() && w.substr(0, key.size()) == key && w[key.size()] == '=')
      return w.substr(key.size() + 1);
    if (sp == std::string_view::npos) break;
    at = sp + 1;
  }
  return {};
}

// A non-negative number of the mark, -1 when absent or malformed.
double number(std::string_view text, std::string_view key) {
  const std::string_view v = word(text, key);
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  return v.empty() || ec != std::errc() || end != v.data() + v.size() ? -1 : double(x);
}

uint64_t loader_of(std::string_view text) {
  const double id = number(text, "loader");
  return id >= 0 ? uint64_t(id) : 0;
}
}  // namespace

bool LoaderModel::on_guard_mark(uint32_t track, const std::string& text) {
  const std::string_view t = text;
  if (t.rfind("dataloader worker ", 0) == 0) {
    const uint32_t pid = pid_of(track);
    if (worker_threads_.size() >= kMaxWorkerPids && !worker_threads_.contains(pid)) return true;
    Threads& w = worker_threads_[pid];
    w.os = std::max(w.os, number(t, "threads"));
    w.torch = std::max(w.torch, number(t, "torch_threads"));
    if (const double base = number(t, "base"), n = number(t, "threads"); base >= 0 && n >= 0)
      w.fresh = std::max(w.fresh, std::max(0.0, n - base));
    return true;
  }
  const bool env = t.rfind("dataloader env ", 0) == 0, batch = t.rfind("dataloader batch ", 0) == 0;
  if (!env && !batch) return false;
  const uint64_t id = loader_of(t);
  if (id == 0 || (guards_.size() >= kMaxGuardLoaders && !guards_.contains(id))) return true;
  Guard& g = guards_[id];
  if (env) {
    // The most free seen at an iterator's creation: a later epoch's
    // creation may find this loader's own batches still in /dev/shm.
    g.shm_free = std::max(g.shm_free, number(t, "shm_free"));
    g.shm_total = std::max(g.shm_total, number(t, "shm_total"));
    if (const double n = number(t, "nofile"); n >= 0) g.nofile = n;
    g.fds = std::max(g.fds, number(t, "fds"));
    if (const std::string_view s = word(t, "sharing"); !s.empty() && s.size() < 32) g.sharing = s;
  } else {
    g.batch_bytes = std::max(g.batch_bytes, number(t, "bytes"));
    g.tensors = std::max(g.tensors, number(t, "tensors"));
  }
  return true;
}

void LoaderModel::guard_facts(DataLoaderReport& r) const {
  if (auto it = guards_.find(r.id); it != guards_.end()) {
    const Guard& g = it->second;
    r.shm_free_bytes = g.shm_free, r.shm_total_bytes = g.shm_total;
    r.nofile_soft = g.nofile, r.open_fds = g.fds;
    r.sharing_strategy = g.sharing;
    r.batch_bytes = g.batch_bytes, r.batch_tensors = g.tensors;
  }
  for (const auto& w : r.workers) {
    auto it = worker_threads_.find(w.pid);
    if (it == worker_threads_.end() || w.pid == 0) continue;
    r.worker_threads = std::max(r.worker_threads, it->second.os);
    r.worker_torch_threads = std::max(r.worker_torch_threads, it->second.torch);
    r.worker_new_threads = std::max(r.worker_new_threads, it->second.fresh);
  }
}

}  // namespace stallscope::analyzer
