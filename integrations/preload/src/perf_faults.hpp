// Perf events of this process, one per online CPU (a per-task event
// inherited by threads cannot be mmapped: EINVAL), user space only,
// inherited by threads created after opening, times on CLOCK_MONOTONIC,
// each with a small mmapped ring (PerfRings). Built on them: major page
// faults (PERF_COUNT_SW_PAGE_FAULTS_MAJ, period 1) for the fault sampler,
// and timer samples with call chains for the native stack sampler. Each set
// is opened by the thread that starts its sampler and drained by that
// sampler's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

struct perf_event_attr;
struct perf_event_header;

namespace stallscope::preload {

// A record copied out of a ring: contiguous, `h.size` bytes.
using RecordSink = void (*)(const perf_event_header& h, const void* record, void* ctx);

class PerfRings {
 public:
  // Opens `a` (with inherit and inherit_thread set here; without
  // inherit_thread on kernels that lack it) for this process on each online
  // CPU and maps a ring of `data_pages` (a power of two; one where the
  // locked-memory allowance refuses more). Returns 0, or -errno of the first
  // refusal (nothing stays open then).
  int open(const perf_event_attr& a, size_t data_pages) noexcept;
  // Hands each sample record to `sink`; returns records the kernel lost
  // because a ring was full.
  uint64_t drain(RecordSink sink, void* ctx) noexcept;
  // The descriptors to poll (one per CPU), and whether the i-th still is
  // its event (the program may have closed it and reused the number).
  const std::vector<int>& fds() const noexcept { return fds_; }
  bool still_ours(size_t i) const noexcept;
  bool is_open() const noexcept { return !fds_.empty(); }
  void close() noexcept;
  // Fork child: the parent's rings are not mapped here (the kernel marks
  // them VM_DONTCOPY); its descriptors are closed, each only if it still
  // is the parent's event.
  void forget_after_fork() noexcept;

  // Largest record handed to a sink; longer ones are skipped.
  static constexpr size_t kMaxRecord = 2048;

 private:
  struct Ring {
    void* base = nullptr;
    size_t data_bytes = 0;  // power of two
  };
  int open_cpu(const perf_event_attr& a, int cpu, size_t data_pages) noexcept;
  uint64_t drain_ring(Ring& r, RecordSink sink, void* ctx) noexcept;

  std::vector<int> fds_;
  std::vector<uint64_t> ids_;  // PERF_EVENT_IOC_ID of each descriptor
  std::vector<Ring> rings_;
};

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
  const std::vector<int>& fds() const noexcept { return rings_.fds(); }
  bool still_ours(size_t i) const noexcept { return rings_.still_ours(i); }
  bool is_open() const noexcept { return rings_.is_open(); }
  void close() noexcept { rings_.close(); }
  void forget_after_fork() noexcept { rings_.forget_after_fork(); }

 private:
  PerfRings rings_;
};

// The online CPUs (/sys/devices/system/cpu/online), or 0..n-1 of the
// configured CPUs when that cannot be read.
std::vector<int> online_cpus() noexcept;
// Parses a CPU list such as "0-3,8,10-11"; empty when malformed.
std::vector<int> parse_cpu_list(const char* text) noexcept;

}  // namespace stallscope::preload
