// Major page faults of this process, sampled by the kernel: one
// perf_event_open(PERF_COUNT_SW_PAGE_FAULTS_MAJ) per online CPU (a per-task
// event inherited by threads cannot be mmapped: EINVAL), period 1, user
// space only, inherited by threads created after opening, times on
// CLOCK_MONOTONIC, each with a small mmapped ring. Only the fault sampler
// uses it: opened by the thread that starts it, drained by its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::preload {

struct FaultSample {
  uint32_t pid = 0, tid = 0;
  uint64_t mono_ns = 0;  // when the kernel finished handling the fault
  uint64_t addr = 0;     // the faulting address
};

using FaultSink = void (*)(const FaultSample& s, void* ctx);

class PerfFaultEvents {
 public:
  // Opens and maps one event per online CPU. Returns 0, or -errno of the
  // first refusal (nothing stays open then).
  int open() noexcept;
  // Hands every available sample to `sink`; returns records the kernel lost
  // because a ring was full.
  uint64_t drain(FaultSink sink, void* ctx) noexcept;
  // The descriptors to poll (one per CPU), and whether the i-th still is
  // its event (the program may have closed it and reused the number).
  const std::vector<int>& fds() const noexcept { return fds_; }
  bool still_ours(size_t i) const noexcept;
  bool is_open() const noexcept { return !fds_.empty(); }
  void close() noexcept;
  // Fork child: the parent's rings are not mapped here (the kernel marks
  // them VM_DONTCOPY); its descriptors are closed, each only if it still
  // is the parent's event (the program may have closed it and reused the
  // number).
  void forget_after_fork() noexcept;

 private:
  struct Ring {
    void* base = nullptr;
    size_t data_bytes = 0;  // power of two
  };
  int open_cpu(int cpu, size_t data_pages) noexcept;
  uint64_t drain_ring(Ring& r, FaultSink sink, void* ctx) noexcept;

  std::vector<int> fds_;
  std::vector<uint64_t> ids_;  // PERF_EVENT_IOC_ID of each descriptor
  std::vector<Ring> rings_;
};

// The online CPUs (/sys/devices/system/cpu/online), or 0..n-1 of the
// configured CPUs when that cannot be read.
std::vector<int> online_cpus() noexcept;
// Parses a CPU list such as "0-3,8,10-11"; empty when malformed.
std::vector<int> parse_cpu_list(const char* text) noexcept;

}  // namespace stallscope::preload
