// Page-aligned, locked host memory without CUDA.
#include <errno.h>
#include <sys/mman.h>

#include "log.hpp"
#include "stallscope/loader/device.hpp"

namespace stallscope::loader {

void* alloc_locked(uint64_t bytes, bool want_lock, bool* locked) noexcept {
  if (locked) *locked = false;
  if (bytes == 0) bytes = 4096;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (want_lock) {
    if (::mlock(p, bytes) == 0) {
      if (locked) *locked = true;
    } else {
      STALLSCOPE_LOADER_NOTE_ONCE("cannot lock staging memory (%s; RLIMIT_MEMLOCK or no "
                                  "CAP_IPC_LOCK): using unlocked memory, counted",
                                  errno == EPERM ? "EPERM" : "ENOMEM");
    }
  }
  return p;
}

void free_locked(void* p, uint64_t bytes, bool locked) noexcept {
  if (p == nullptr) return;
  if (bytes == 0) bytes = 4096;
  if (locked) ::munlock(p, bytes);
  ::munmap(p, bytes);
}

}  // namespace stallscope::loader
