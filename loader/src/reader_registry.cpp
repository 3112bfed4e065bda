// The storage backends, side by side: chosen by name, or io_uring first and
// the pread pool where io_uring cannot be set up (ENOSYS, EPERM, seccomp,
// io_uring_disabled).
#include <cstring>
#include <string>

#include "stallscope/loader/storage.hpp"

namespace stallscope::loader {

namespace {

using Factory = std::unique_ptr<StorageReader> (*)(const ReaderOptions&, Sys&, int*) noexcept;

struct BackendEntry {
  Backend kind;
  const char* name;
  Factory make;
};

constexpr BackendEntry kBackends[] = {
    {Backend::kUring, "io_uring", make_uring_reader},
    {Backend::kPread, "pread pool", make_pread_reader},
};

std::string describe(const BackendEntry& e, const ReaderOptions& o) {
  std::string s = e.name;
  s += " (queue depth " + std::to_string(o.queue_depth);
  if (e.kind == Backend::kPread) s += ", " + std::to_string(o.pread_threads) + " threads";
  return s + ")";
}

}  // namespace

std::unique_ptr<StorageReader> make_reader(Backend want, const ReaderOptions& o, Sys& sys,
                                           std::string* why) noexcept {
  try {
    std::string failures;
    for (const BackendEntry& e : kBackends) {
      if (want != Backend::kAuto && want != e.kind) continue;
      int err = 0;
      auto r = e.make(o, sys, &err);
      if (r) {
        if (why) {
          *why = "storage backend: " + describe(e, o);
          *why += want == Backend::kAuto ? (failures.empty() ? ", chosen automatically"
                                                             : ", because " + failures)
                                         : ", as configured";
        }
        return r;
      }
      if (!failures.empty()) failures += "; ";
      failures += std::string(e.name) + " unavailable: " + std::strerror(-err);
    }
    if (why) *why = "no storage backend could start: " + failures;
  } catch (...) {
    if (why) why->clear();
  }
  return nullptr;
}

}  // namespace stallscope::loader
