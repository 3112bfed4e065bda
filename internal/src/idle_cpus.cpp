#include "stallscope/internal/idle_cpus.hpp"

#include <fcntl.h>

#include <cerrno>
#include <charconv>

namespace stallscope::sys {
namespace {

constexpr int kMaxAffinityCpus = 1 << 16;
constexpr size_t kMaxStatBytes = 16 << 20;

// Next space-separated unsigned number of `s` from `pos`; false at the end.
bool next_number(std::string_view s, size_t& pos, uint64_t& v) {
  while (pos < s.size() && s[pos] == ' ') ++pos;
  const auto [end, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), v);
  if (ec != std::errc()) return false;
  pos = static_cast<size_t>(end - s.data());
  return true;
}

// "cpuN user nice system idle iowait irq softirq steal [guest guest_nice]".
// guest time is already inside user/nice, so it is left out of the total.
bool parse_cpu_line(std::string_view line, int& cpu, CpuJiffies& j) {
  size_t pos = 3;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), n);
  if (ec != std::errc() || n > static_cast<uint64_t>(kMaxAffinityCpus)) return false;
  pos = static_cast<size_t>(end - line.data());
  uint64_t f[8] = {};
  int got = 0;
  while (got < 8 && next_number(line, pos, f[got])) ++got;
  if (got < 4) return false;  // very old kernels stop after idle
  cpu = static_cast<int>(n);
  j.idle = f[3] + f[4];
  j.total = f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
  j.seen = true;
  return true;
}

}  // namespace

// ---- AffinityReader

AffinityReader::~AffinityReader() {
  if (set_ != nullptr) CPU_FREE(set_);
}

bool AffinityReader::read(pid_t pid, std::vector<int>& out) {
  out.clear();
  for (int n = ncpus_ > 0 ? ncpus_ : 1024; n <= kMaxAffinityCpus; n *= 2) {
    if (n != ncpus_) {
      if (set_ != nullptr) CPU_FREE(set_);
      set_ = CPU_ALLOC(n);
      ncpus_ = set_ != nullptr ? n : 0;
      if (set_ == nullptr) return false;
    }
    const size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set_);
    if (::sched_getaffinity(pid, size, set_) == 0) {
      for (int c = 0; c < n; ++c) {
        if (CPU_ISSET_S(c, size, set_)) out.push_back(c);
      }
      return true;
    }
    if (errno != EINVAL) return false;
  }
  return false;
}

// ---- /proc/stat

bool parse_proc_stat_cpus(std::string_view text, std::vector<CpuJiffies>& by_cpu) {
  for (auto& j : by_cpu) j.seen = false;
  bool seen_cpu_lines = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return false;  // the last line may be cut off
    const std::string_view line = text.substr(0, nl);
    text = text.substr(nl + 1);
    const bool is_cpu = line.size() > 3 && line.substr(0, 3) == "cpu";
    if (!is_cpu) {
      if (seen_cpu_lines) return true;  // CPU lines come first: done
      continue;
    }
    seen_cpu_lines = true;
    int cpu = -1;
    CpuJiffies j;
    if (line[3] >= '0' && line[3] <= '9' && parse_cpu_line(line, cpu, j) &&
        static_cast<size_t>(cpu) < by_cpu.size()) {
      by_cpu[static_cast<size_t>(cpu)] = j;
    }
  }
  return seen_cpu_lines;
}

std::optional<double> idle_cpus_between(const std::vector<CpuJiffies>& prev,
                                        const std::vector<CpuJiffies>& cur,
                                        const std::vector<int>& cpus) {
  uint64_t idle = 0, total = 0;
  int n = 0;
  for (const int c : cpus) {
    const auto i = static_cast<size_t>(c);
    if (c < 0 || i >= prev.size() || i >= cur.size() || !prev[i].seen || !cur[i].seen) continue;
    // Counters only grow; a decrease (CPU hot-unplugged and back) is no data.
    if (cur[i].total < prev[i].total || cur[i].idle < prev[i].idle) continue;
    idle += cur[i].idle - prev[i].idle;
    total += cur[i].total - prev[i].total;
    ++n;
  }
  if (total == 0) return std::nullopt;
  const double frac = double(idle) / double(total);
  return n * (frac > 1.0 ? 1.0 : frac);
}

// ---- IdleCpuMeter

bool IdleCpuMeter::open(const std::string& proc_root) {
  root_ = proc_root;
  have_prev_ = false;
  if (buf_.empty()) buf_.resize(8192);
  return fd_.open_kept_at(AT_FDCWD, (proc_root + "/stat").c_str(), O_RDONLY) == 0;
}

void IdleCpuMeter::set_cpus(const std::vector<int>& cpus) {
  cpus_.assign(cpus.begin(), cpus.end());
  const size_t need = cpus_.empty() ? 0 : static_cast<size_t>(cpus_.back()) + 1;
  if (need > prev_.size()) {
    prev_.resize(need);  // new CPUs have seen = false: skipped once
    cur_.resize(need);
  }
}

void IdleCpuMeter::revalidate() {
  if (fd_.valid() && !fd_.still_ours()) {
    fd_.forget();
    open(root_);
  }
}

// Reads into buf_, growing it (rarely: CPUs added, huge interrupt lines)
// until every CPU line fits. Steady state: one pread, no allocation.
bool IdleCpuMeter::read_snapshot() {
  if (!fd_.valid() && !open(root_)) return false;
  for (;;) {
    const ssize_t n = fd_.pread_text(buf_.data(), buf_.size());
    if (n < 0) return false;
    const bool full = static_cast<size_t>(n) + 1 >= buf_.size();
    if (parse_proc_stat_cpus(std::string_view(buf_.data(), static_cast<size_t>(n)), cur_)) {
      return true;
    }
    if (!full || buf_.size() >= kMaxStatBytes) return false;
    buf_.resize(buf_.size() * 2);
  }
}

std::optional<double> IdleCpuMeter::sample() {
  if (!read_snapshot()) return std::nullopt;
  if (!have_prev_) {
    prev_.swap(cur_);
    have_prev_ = true;
    return std::nullopt;
  }
  const auto idle = idle_cpus_between(prev_, cur_, cpus_);
  if (!idle) return last_;  // no jiffy passed yet: keep the older baseline
  prev_.swap(cur_);
  last_ = idle;
  return idle;
}

}  // namespace stallscope::sys
