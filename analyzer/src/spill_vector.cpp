// The scratch file behind SpillVector: one per process, opened on first use
// in $TMPDIR (else /tmp) without a name (O_TMPFILE, else created and unlinked
// at once), so nothing is left behind however the process ends.
#include "stallscope/analyzer/spill_vector.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace stallscope::analyzer::spill {

namespace {

struct State {
  std::mutex mu;
  bool tried = false;
  int fd = -1;
  std::string dir;
  std::string failure;  // the first failure, for the report's warnings
  int64_t end = 0;
  uint64_t in_use = 0;
  std::unordered_map<size_t, std::vector<int64_t>> free_by_size;
};

State& state() {
  static State* s = new State;  // outlives every table, even static ones
  return *s;
}

int open_scratch(const std::string& dir) {
#ifdef O_TMPFILE
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
#endif
  std::string path = dir + "/stallscope-spill-XXXXXX";
  const int tfd = ::mkostemp(path.data(), O_CLOEXEC);
  if (tfd >= 0) ::unlink(path.c_str());
  return tfd;
}

}  // namespace

Arena& Arena::instance() {
  static Arena a;
  return a;
}

int64_t Arena::reserve(size_t bytes) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (!s.tried) {
    s.tried = true;
    const char* t = std::getenv("TMPDIR");
    s.dir = t != nullptr && *t != '\0' ? t : "/tmp";
    s.fd = open_scratch(s.dir);
    if (s.fd < 0)
      s.failure = "no scratch file could be created in " + s.dir + " (" + std::strerror(errno) + ")";
  }
  if (s.fd < 0) return -1;
  s.in_use += bytes;
  auto& list = s.free_by_size[bytes];
  if (!list.empty()) {
    const int64_t off = list.back();
    list.pop_back();
    return off;
  }
  const int64_t off = s.end;
  s.end += static_cast<int64_t>(bytes);
  return off;
}

void Arena::release(int64_t off, size_t bytes) noexcept {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.in_use -= bytes;
  try {
    s.free_by_size[bytes].push_back(off);
  } catch (...) {  // out of memory: the extent is simply not reused
  }
}

bool Arena::write(int64_t off, const void* p, size_t n) noexcept {
  const int fd = state().fd;
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, c, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {  // ENOSPC, EIO, …: the caller keeps the chunk in memory
      const int err = w < 0 ? errno : ENOSPC;
      State& s = state();
      std::lock_guard lock(s.mu);
      try {
        if (s.failure.empty())
          s.failure = "writing the scratch file in " + s.dir + " failed (" + std::strerror(err) + ")";
      } catch (...) {  // out of memory: the failure goes unnamed
      }
      return false;
    }
    c += w;
    n -= static_cast<size_t>(w);
    off += w;
  }
  return true;
}

void Arena::read(int64_t off, void* p, size_t n) {
  const int fd = state().fd;
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, c, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw std::runtime_error("stallscope: reading the analyzer's scratch file in " + state().dir +
                               " failed: " + (r < 0 ? std::strerror(errno) : "short read"));
    c += r;
    n -= static_cast<size_t>(r);
    off += r;
  }
}

std::string Arena::failure() const {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.failure;
}

uint64_t Arena::bytes_in_use() const noexcept {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.in_use;
}

}  // namespace stallscope::analyzer::spill
