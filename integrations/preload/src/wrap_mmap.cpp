// mmap and mmap64: a file mapped for reading (not for execution: the
// dynamic loader maps libraries without going through libc's entry point,
// and a program's own executable mappings are code) starts the page-fault
// sampler of this process (fault_sampler.hpp). Nothing else is recorded here.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "fault_sampler.hpp"
#include "real.hpp"
#include "shim.hpp"

namespace {

void* raw_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
void* raw_mmap64(void* addr, size_t len, int prot, int flags, int fd, off64_t off) noexcept {
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

STALLSCOPE_REAL(mmap, raw_mmap);
STALLSCOPE_REAL(mmap64, raw_mmap64);

void after_mapping(void* p, int prot, int flags, int fd) noexcept {
  if (p == MAP_FAILED || fd < 0 || (flags & MAP_ANONYMOUS) != 0) return;
  if ((prot & PROT_READ) == 0 || (prot & PROT_EXEC) != 0) return;
  if (!stallscope::preload::g_active.load(std::memory_order_relaxed)) return;
  const stallscope::preload::Guard guard;
  if (!guard.entered()) return;  // the recorder's own threads, nested calls
  const int saved = errno;
  stallscope::preload::fault_sampler_on_mapping();
  errno = saved;
}

}  // namespace

STALLSCOPE_SHIM_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  auto fn = real_mmap.get();
  if (fn == nullptr) return raw_mmap(addr, len, prot, flags, fd, off);
  void* p = fn(addr, len, prot, flags, fd, off);
  after_mapping(p, prot, flags, fd);
  return p;
}

STALLSCOPE_SHIM_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd,
                                     off64_t off) {
  auto fn = real_mmap64.get();
  if (fn == nullptr) return raw_mmap64(addr, len, prot, flags, fd, off);
  void* p = fn(addr, len, prot, flags, fd, off);
  after_mapping(p, prot, flags, fd);
  return p;
}
