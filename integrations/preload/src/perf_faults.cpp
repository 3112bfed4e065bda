#include "perf_faults.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::preload {

namespace {

// Data pages of one CPU's ring: 8 (1024 samples between two drains) up to
// 16 CPUs, fewer beyond so that a process locks at most ~128 data pages
// (samples spread over the CPUs its threads run on); one where the locked
// memory allowance (perf_event_mlock_kb, RLIMIT_MEMLOCK) refuses more.
size_t data_pages_for(size_t cpus) {
  size_t pages = 8;
  while (pages > 1 && pages * cpus > 128) pages /= 2;
  return pages;
}

// The drain thread is woken once 64 samples of a CPU wait (half of a
// one-page ring, 1/16 of the usual one), else by its poll timeout.
constexpr uint32_t kWakeBytes = 2048;

struct SampleRecord {  // PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR
  perf_event_header h;
  uint32_t pid, tid;
  uint64_t time;
  uint64_t addr;
};
struct LostRecord {
  perf_event_header h;
  uint64_t id, lost;
};

perf_event_attr fault_attr() {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_PAGE_FAULTS_MAJ;
  a.sample_period = 1;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.watermark = 1;
  a.wakeup_watermark = kWakeBytes;
  return a;
}

void on_fault_record(const perf_event_header& h, const void* rec, void* ctx) {
  if (h.size < sizeof(SampleRecord)) return;
  auto* sink = static_cast<std::pair<FaultSink, void*>*>(ctx);
  SampleRecord s;
  std::memcpy(&s, rec, sizeof s);
  sink->first(FaultSample{s.pid, s.tid, s.time, s.addr}, sink->second);
}

long perf_open(perf_event_attr* a, int cpu) {
  return ::syscall(SYS_perf_event_open, a, static_cast<pid_t>(::syscall(SYS_getpid)), cpu, -1,
                   PERF_FLAG_FD_CLOEXEC);
}

void copy_from_ring(const uint8_t* data, size_t size, uint64_t pos, void* out, size_t n) {
  const size_t at = static_cast<size_t>(pos & (size - 1));
  const size_t first = n < size - at ? n : size - at;
  std::memcpy(out, data + at, first);
  if (first < n) std::memcpy(static_cast<uint8_t*>(out) + first, data, n - first);
}

}  // namespace

std::vector<int> parse_cpu_list(const char* text) noexcept {
  std::vector<int> cpus;
  try {
    const char* p = text;
    while (*p != '\0' && *p != '\n') {
      char* end = nullptr;
      const long a = std::strtol(p, &end, 10);
      if (end == p || a < 0 || a > 65535) return {};
      long b = a;
      p = end;
      if (*p == '-') {
        b = std::strtol(p + 1, &end, 10);
        if (end == p + 1 || b < a || b > 65535) return {};
        p = end;
      }
      for (long c = a; c <= b; ++c) cpus.push_back(static_cast<int>(c));
      if (*p == ',')
        ++p;
      else if (*p != '\0' && *p != '\n')
        return {};
    }
  } catch (...) {
    return {};
  }
  return cpus;
}

std::vector<int> online_cpus() noexcept {
  char text[4096] = {};
  const long fd =
      ::syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const long n = ::syscall(SYS_read, fd, text, sizeof text - 1);
    ::syscall(SYS_close, fd);
    if (n > 0) {
      std::vector<int> cpus = parse_cpu_list(text);
      if (!cpus.empty()) return cpus;
    }
  }
  std::vector<int> cpus;
  try {
    const long n = ::sysconf(_SC_NPROCESSORS_CONF);
    for (long c = 0; c < (n > 0 ? n : 1); ++c) cpus.push_back(static_cast<int>(c));
  } catch (...) {
  }
  return cpus;
}

int PerfFaultEvents::open() noexcept {
  const perf_event_attr a = fault_attr();
  return rings_.open(a, data_pages_for(online_cpus().size()));
}

uint64_t PerfFaultEvents::drain(FaultSink sink, void* ctx) noexcept {
  std::pair<FaultSink, void*> to{sink, ctx};
  return rings_.drain(&on_fault_record, &to);
}

int PerfRings::open(const perf_event_attr& a, size_t data_pages) noexcept {
  close();
  const std::vector<int> cpus = online_cpus();
  if (cpus.empty()) return -ENOMEM;
  try {
    fds_.reserve(cpus.size());
    ids_.reserve(cpus.size());
    rings_.reserve(cpus.size());
  } catch (...) {
    return -ENOMEM;
  }
  for (int cpu : cpus) {
    const int rc = open_cpu(a, cpu, data_pages);
    if (rc != 0) {
      close();
      return rc;
    }
  }
  return 0;
}

int PerfRings::open_cpu(const perf_event_attr& attr, int cpu, size_t data_pages) noexcept {
  perf_event_attr a = attr;
  a.inherit = 1;
  // Forked children open their own events; without this (Linux < 5.13)
  // their samples also reach ours and are dropped by pid.
  a.inherit_thread = 1;
  long fd = perf_open(&a, cpu);
  if (fd < 0 && errno == EINVAL) {  // a kernel without inherit_thread
    a.inherit_thread = 0;
    fd = perf_open(&a, cpu);
  }
  if (fd < 0) return -errno;
  fd = sys::move_fd_high(static_cast<int>(fd));  // away from the program's numbers
  if (fd < 0) return -EMFILE;
  uint64_t id = 0;
  ::syscall(SYS_ioctl, fd, PERF_EVENT_IOC_ID, &id);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  int err = 0;
  for (size_t pages : {data_pages, size_t{1}}) {
    void* base = ::mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED,
                        static_cast<int>(fd), 0);
    if (base != MAP_FAILED) {
      fds_.push_back(static_cast<int>(fd));  // reserved: cannot throw
      ids_.push_back(id);
      rings_.push_back(Ring{base, pages * page});
      return 0;
    }
    err = errno;
  }
  ::syscall(SYS_close, fd);
  return -err;
}

uint64_t PerfRings::drain(RecordSink sink, void* ctx) noexcept {
  uint64_t lost = 0;
  for (Ring& r : rings_) lost += drain_ring(r, sink, ctx);
  return lost;
}

uint64_t PerfRings::drain_ring(Ring& r, RecordSink sink, void* ctx) noexcept {
  auto* meta = static_cast<perf_event_mmap_page*>(r.base);
  const uint8_t* data = static_cast<const uint8_t*>(r.base) + ::sysconf(_SC_PAGESIZE);
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  uint64_t lost = 0;
  alignas(8) uint8_t rec[kMaxRecord];
  while (tail < head) {
    perf_event_header h;
    copy_from_ring(data, r.data_bytes, tail, &h, sizeof h);
    if (h.size < sizeof h || h.size > head - tail) {  // cannot happen; never loop on it
      tail = head;
      break;
    }
    if (h.size <= sizeof rec) {
      copy_from_ring(data, r.data_bytes, tail, rec, h.size);
      if (h.type == PERF_RECORD_SAMPLE) {
        sink(h, rec, ctx);
      } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(LostRecord)) {
        LostRecord l;
        std::memcpy(&l, rec, sizeof l);
        lost += l.lost;
      }
    }
    tail += h.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  return lost;
}

void PerfRings::close() noexcept {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (const Ring& r : rings_) ::munmap(r.base, r.data_bytes + page);
  for (int fd : fds_) ::syscall(SYS_close, fd);
  rings_.clear();
  fds_.clear();
  ids_.clear();
}

bool PerfRings::still_ours(size_t i) const noexcept {
  uint64_t id = 0;
  return i < fds_.size() && ::syscall(SYS_ioctl, fds_[i], PERF_EVENT_IOC_ID, &id) == 0 &&
         id == ids_[i];
}

void PerfRings::forget_after_fork() noexcept {
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (still_ours(i)) ::syscall(SYS_close, fds_[i]);
  }
  rings_.clear();
  fds_.clear();
  ids_.clear();
}

}  // namespace stallscope::preload
